package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ValidateJUnit checks doc against Jenkins' JUnit schema (xunit-plugin's
// junit-10.xsd, in the shared folder beside the module) with xmllint; it
// skips, naming what is missing, where xmllint or the schema is not there.
func ValidateJUnit(t testing.TB, doc []byte) {
	t.Helper()
	xmllint, err := exec.LookPath("xmllint")
	if err != nil {
		t.Skip("xmllint is not installed (Debian: libxml2-utils)")
	}
	schema := Shared(t, "reference", "junit", "junit-10.xsd")
	file := filepath.Join(t.TempDir(), "junit.xml")
	if err := os.WriteFile(file, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(xmllint, "--noout", "--schema", schema, file).CombinedOutput()
	if err != nil {
		t.Errorf("xmllint: the JUnit file does not validate against junit-10.xsd: %v\n%s\n%s", err, out, doc)
	}
}
