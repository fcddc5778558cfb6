// Package gates holds the stage ladder and decides, before any Case process
// may start, whether a run at a given stage is allowed. The ladder is one
// table; every refusal is a typed blocker.
package gates

import (
	"fmt"

	ctoharness "github.com/cto-harness/cto-harness"
)

// FixtureKind says where a stage's fixture comes from.
type FixtureKind string

// Fixture kinds.
const (
	FixtureArtificial FixtureKind = "copied_artificial_fixture"
	FixtureOwnedRepo  FixtureKind = "copied_owned_repository"
	FixtureNone       FixtureKind = "none"
)

// Stage is one rung of the ladder.
type Stage struct {
	N        int
	Name     string
	Backend  ctoharness.Backend // "" when the stage is not approved
	Fixture  FixtureKind
	Approved bool
}

// Ladder is the stage table. Stages above 3 are named so that a request for
// them is refused by name rather than as an unknown number.
var ladder = [...]Stage{
	{1, "evidence interface", ctoharness.BackendFake, FixtureArtificial, true},
	{2, "artificial fixture", ctoharness.BackendCase, FixtureArtificial, true},
	{3, "copied owned repo", ctoharness.BackendCase, FixtureOwnedRepo, true},
	{4, "sandbox repo", "", FixtureNone, false},
	{5, "owned repo in place", "", FixtureNone, false},
	{6, "default candidate", "", FixtureNone, false},
}

// Ladder returns a copy of the stage table.
func Ladder() []Stage { return append([]Stage(nil), ladder[:]...) }

// Lookup returns stage n, or a STAGE_UNKNOWN blocker.
func Lookup(n int) (Stage, error) {
	if n < 1 || n > len(ladder) {
		return Stage{}, ctoharness.Block(ctoharness.BlockStageUnknown, ctoharness.StepGate, nil,
			"stage %d is not on the ladder; stages are 1 to %d", n, len(ladder))
	}
	return ladder[n-1], nil
}

// String names a stage for messages.
func (s Stage) String() string { return fmt.Sprintf("stage %d (%s)", s.N, s.Name) }
