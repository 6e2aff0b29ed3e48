// Package builtin embeds miotool's own TunaNet model (miotool.tn.model and
// miotool_metadata.tn.model, arch aiheur.BuiltinArch) and installs it as
// aiheur.Embedded, the model set used where no MIOpen model directory is
// found. Importing the package is what installs it.
//
// The model ranks miotool's solvers (conv.Solvers). It was fitted by
// tools/tunanet-fit to find results that tools/tunanet-collect measured on
// the simulator: the data is the testdata file the metadata names
// (sim-find.csv), and the metadata names the device, the collection date
// and the tool versions. This package's tests re-fit that file and require
// the committed bytes. testdata/h200-find.csv is the same sweep measured on
// an NVIDIA H200; to fit the model to it (or to another device's data),
// see scripts/fit-builtin-model.sh.
package builtin

import (
	"embed"
	"io/fs"

	"miotool/internal/aiheur"
)

//go:embed models/*.tn.model
var files embed.FS

// FS holds the model files at its root.
var FS fs.FS = mustSub(files, "models")

func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		// The directory is embedded above; this cannot fail.
		panic("builtin: " + err.Error())
	}
	return sub
}

func init() {
	aiheur.Embedded = FS
}
