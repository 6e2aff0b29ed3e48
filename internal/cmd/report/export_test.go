package report

// SuiteSpellings is suiteSpellings, for the test that holds it to the
// whole command tree.
var SuiteSpellings = suiteSpellings
