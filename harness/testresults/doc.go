// Package testresults parses a test runner's machine-readable report
// (`go test -json`, JUnit XML, TAP) into one result per test: an identity,
// an outcome, a duration and the test's own output. A verification command
// decides from these results, never from a runner's free-text summary,
// because free text changes between versions and locales and a test's own
// output can print anything, including a fake "PASS".
package testresults
