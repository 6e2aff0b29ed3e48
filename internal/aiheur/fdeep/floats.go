package fdeep

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// decodeFloats reads one numeric array of a model file. fdeep writes a
// list of base64 strings whose decoded bytes concatenate to little-endian
// float32 values; a single string and a plain list of numbers (older
// exporters) are accepted too.
func decodeFloats(raw json.RawMessage) ([]float32, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, errors.New("array is missing")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("bad base64 string: %v", err)
		}
		return base64Floats([]string{s})
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("bad array: %v", err)
		}
		if len(items) == 0 {
			return []float32{}, nil
		}
		first := bytes.TrimSpace(items[0])
		if len(first) > 0 && first[0] == '"' {
			var chunks []string
			if err := json.Unmarshal(raw, &chunks); err != nil {
				return nil, fmt.Errorf("bad list of base64 strings: %v", err)
			}
			return base64Floats(chunks)
		}
		var values []float32
		if err := json.Unmarshal(raw, &values); err != nil {
			return nil, fmt.Errorf("bad list of numbers: %v", err)
		}
		return values, nil
	}
	return nil, fmt.Errorf("expected a list of base64 strings, found %.20q", raw)
}

func base64Floats(chunks []string) ([]float32, error) {
	size := 0
	for _, c := range chunks {
		size += base64.StdEncoding.DecodedLen(len(c))
	}
	buf := make([]byte, 0, size)
	for i, c := range chunks {
		var err error
		buf, err = base64.StdEncoding.AppendDecode(buf, []byte(c))
		if err != nil {
			return nil, fmt.Errorf("base64 chunk %d: %v", i, err)
		}
	}
	if len(buf)%4 != 0 {
		return nil, fmt.Errorf("%d decoded bytes are not a whole number of float32 values", len(buf))
	}
	out := make([]float32, len(buf)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
	}
	return out, nil
}
