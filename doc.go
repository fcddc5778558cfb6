// Package ctoharness holds the domain types shared by every part of
// cto-harness: blocker codes, run statuses, normalized events, trace entries
// and the report. Behaviour lives in the sub-packages; keeping the vocabulary
// here lets the gate ladder, the pipeline and the validators agree on one set
// of names, and lets a test keep the JSON Schemas in step with the Go types.
package ctoharness

// SchemaVersion is the evidence schema version written into every artifact.
// A stage validation record from another schema version never satisfies a gate.
const SchemaVersion = "1.0.0"

// Version is the harness version recorded in freshness proofs.
const Version = "0.1.0"
