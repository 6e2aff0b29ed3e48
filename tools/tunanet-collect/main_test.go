package main

import (
	"slices"
	"testing"
)

func TestSweep(t *testing.T) {
	a := Sweep(40, 3, 1_000_000)
	b := Sweep(40, 3, 1_000_000)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed gave two different sweeps")
	}
	if c := Sweep(40, 4, 1_000_000); slices.Equal(a, c) {
		t.Error("another seed gave the same sweep")
	}
	stress, random := 0, 0
	for i, p := range a {
		if err := p.Validate(); err != nil {
			t.Errorf("problem %d: %v", i, err)
		}
		if p.N == 1 && p.C == 1 && p.K == 1 && p.R == 2 && p.S == 2 && p.H == p.W {
			stress++
		}
		if i >= len(a)-40 {
			random++
			if macs(p) > 1_000_000 {
				t.Errorf("random problem %s has %d MACs, over the cap", p, macs(p))
			}
		}
	}
	if stress < 10 || random != 40 {
		t.Errorf("%d problems of the stress-threads shape, %d random; want at least 10 and 40", stress, random)
	}
}

func TestOptionsValidate(t *testing.T) {
	good := options{out: "x.csv", samples: 3, naiveTimeout: 300, random: 10, maxMACs: 1}
	if err := good.validate(); err != nil {
		t.Fatal(err)
	}
	for _, edit := range []func(*options){
		func(o *options) { o.out = "" },
		func(o *options) { o.samples = 0 },
		func(o *options) { o.naiveTimeout = -1 },
		func(o *options) { o.random = -1 },
		func(o *options) { o.maxMACs = 0 },
		func(o *options) { o.date = "29/11/2026" },
	} {
		o := good
		edit(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
