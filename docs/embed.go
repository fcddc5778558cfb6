// Package docs carries the governance documents stage 3 requires, built into
// the binary so that stage 3 validation (and the demo) works from any
// directory, not only from a checkout of this repository.
package docs

import "embed"

// Governance holds docs/prd and docs/issues.
//
//go:embed prd/*.md issues/*.md
var Governance embed.FS
