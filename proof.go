package ctoharness

import (
	"fmt"
	"time"
)

// EntryType is the kind of a manifest entry. It is a byte, not a string:
// a walk holds one entry per file (a million-file tree's is 8 MB
// smaller for it), and JSON and text see its name.
type EntryType uint8

// Manifest entry types; the zero value is none, which never encodes.
const (
	EntryFile EntryType = iota + 1
	EntryDir
	EntrySymlink
	EntryOther
)

var entryTypeNames = [...]string{EntryFile: "file", EntryDir: "dir", EntrySymlink: "symlink", EntryOther: "other"}

// AllEntryTypes lists every entry type; the schema enum is checked against
// it.
func AllEntryTypes() []EntryType { return []EntryType{EntryFile, EntryDir, EntrySymlink, EntryOther} }

// String is the type's name ("file", "dir", "symlink", "other"), or a
// description of a value that is none of them.
func (t EntryType) String() string {
	if t > 0 && int(t) < len(entryTypeNames) {
		return entryTypeNames[t]
	}
	return fmt.Sprintf("EntryType(%d)", uint8(t))
}

// MarshalText is the type's name; a value that is no type does not encode.
func (t EntryType) MarshalText() ([]byte, error) {
	if t == 0 || int(t) >= len(entryTypeNames) {
		return nil, fmt.Errorf("manifest entry type %d is none of %v", uint8(t), AllEntryTypes())
	}
	return []byte(entryTypeNames[t]), nil
}

// UnmarshalText reads a type's name; any other text is refused.
func (t *EntryType) UnmarshalText(b []byte) error {
	for k := EntryFile; int(k) < len(entryTypeNames); k++ {
		if string(b) == entryTypeNames[k] {
			*t = k
			return nil
		}
	}
	return fmt.Errorf("manifest entry type %q is none of %v", b, AllEntryTypes())
}

// ManifestEntry is the lstat of one path under a repository root (relative,
// slash-separated; "." is the root itself). Any write to a file changes its
// ctime, and creating or removing a child changes its directory's ctime, so
// equal manifests before and after are a strong non-mutation proof.
type ManifestEntry struct {
	Path string    `json:"path"`
	Type EntryType `json:"type"`
	Mode uint32    `json:"mode"`
	Size int64     `json:"size"`
	// The fields are ordered for the JSON and then so that alignment
	// leaves the least room empty: a walk holds one entry per file, 88
	// bytes each.
	MtimeNs int64  `json:"mtime_ns"`
	CtimeNs int64  `json:"ctime_ns"`
	Inode   uint64 `json:"inode"`
	// *EntryExtra holds the target and digest (Target, SHA256), which
	// few entries have: nil for the rest, eight bytes instead of 32.
	*EntryExtra
	// ObjectVerified is set in an after-proof on an immutable git object
	// file (loose object, pack, pack index) whose lstat changed in ctime
	// only and whose content was checked against its name: a hard link
	// (a local clone) did that, not a write.
	ObjectVerified bool `json:"object_verified,omitempty"`
	// Device and owner complete the stat data git caches in its index;
	// the status route compares them, the evidence does not carry them.
	UID uint32 `json:"-"`
	GID uint32 `json:"-"`
	Dev uint64 `json:"-"`
}

// EntryExtra is what only some manifest entries carry; its fields appear
// in the entry's JSON as the entry's own. Read and set them through the
// entry (Target, SHA256, SetTarget, SetSHA256): the pointer is nil when
// both are empty.
type EntryExtra struct {
	// LinkTarget is a symlink's target.
	LinkTarget string `json:"target,omitempty"`
	// Digest is the content's SHA-256, hex.
	Digest string `json:"sha256,omitempty"`
}

// Target is a symlink's target ("" for any other entry).
func (e *ManifestEntry) Target() string {
	if e.EntryExtra == nil {
		return ""
	}
	return e.LinkTarget
}

// SHA256 is the content digest, hex, where the entry records one.
func (e *ManifestEntry) SHA256() string {
	if e.EntryExtra == nil {
		return ""
	}
	return e.Digest
}

// SetTarget records a symlink's target. Like SetSHA256 it gives the entry
// an EntryExtra of its own: a copy of an entry shares the pointer, and
// setting one never changes the other.
func (e *ManifestEntry) SetTarget(t string) {
	x := e.extra()
	x.LinkTarget = t
	e.setExtra(x)
}

// SetSHA256 records the content digest.
func (e *ManifestEntry) SetSHA256(d string) {
	x := e.extra()
	x.Digest = d
	e.setExtra(x)
}

// Equal reports whether two entries hold the same values, extras
// compared by what they hold, not where (== compares the pointer).
func (e ManifestEntry) Equal(o ManifestEntry) bool {
	ex, ox := e.extra(), o.extra()
	e.EntryExtra, o.EntryExtra = nil, nil
	return e == o && ex == ox
}

func (e *ManifestEntry) extra() EntryExtra {
	if e.EntryExtra == nil {
		return EntryExtra{}
	}
	return *e.EntryExtra
}

func (e *ManifestEntry) setExtra(x EntryExtra) {
	if x == (EntryExtra{}) {
		e.EntryExtra = nil
		return
	}
	e.EntryExtra = &x
}

// HeadState is the repository HEAD.
type HeadState struct {
	SymbolicRef string `json:"symbolic_ref"`
	Commit      string `json:"commit"`
	Tree        string `json:"tree"`
}

// StatusEntry is one non-clean path in a worktree status.
type StatusEntry struct {
	Path     string `json:"path"`
	Staging  string `json:"staging"`
	Worktree string `json:"worktree"`
}

// StatusRoute names how a source proof's status was computed.
type StatusRoute string

// Status routes.
const (
	// StatusRouteFast is the harness's own status: one lstat walk, the
	// index and the object store, with git's comparison rules.
	StatusRouteFast StatusRoute = "fast"
)

// SourceProof is proofs/source-before.json or proofs/source-after.json.
type SourceProof struct {
	SchemaVersion string `json:"schema_version"`
	RunID         string `json:"run_id"`
	Kind          string `json:"kind"`
	Root          string `json:"root"`
	// GitDir is the source's git directory when a gitfile at Root/.git
	// names one outside the worktree (git init --separate-git-dir); the
	// manifest's .git/ entries were read there. Empty for an embedded .git.
	GitDir      string        `json:"git_dir,omitempty"`
	TakenAt     time.Time     `json:"taken_at"`
	Head        HeadState     `json:"head"`
	RefsDigest  string        `json:"refs_digest"`
	RefCount    int           `json:"ref_count"`
	StatusClean bool          `json:"status_clean"`
	Status      []StatusEntry `json:"status"`
	// StatusRoute names the code that computed Status (see
	// StatusRoute* constants).
	StatusRoute    StatusRoute     `json:"status_route"`
	Deep           bool            `json:"deep"`
	ManifestDigest string          `json:"manifest_digest"`
	Manifest       []ManifestEntry `json:"manifest"`
	// Packed holds the manifest instead of Manifest once Pack is called:
	// what a run keeps of its before-proof while the run goes on.
	Packed *PackedManifest `json:"-"`
}

// Difference is one field that differs between two proofs.
type Difference struct {
	Path   string `json:"path"`
	Field  string `json:"field"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// NonMutationProof is proofs/source-non-mutation.json.
type NonMutationProof struct {
	SchemaVersion   string       `json:"schema_version"`
	RunID           string       `json:"run_id"`
	BeforeDigest    string       `json:"before_digest"`
	AfterDigest     string       `json:"after_digest"`
	HeadEqual       bool         `json:"head_equal"`
	RefsEqual       bool         `json:"refs_equal"`
	StatusEqual     bool         `json:"status_equal"`
	ManifestEqual   bool         `json:"manifest_equal"`
	Mutated         bool         `json:"mutated"`
	DifferenceCount int          `json:"difference_count"`
	Differences     []Difference `json:"differences"`
	// Benign are metadata-only changes to immutable git object files
	// whose content was verified unchanged (see ManifestEntry.ObjectVerified);
	// they are recorded and do not count as a mutation.
	Benign []Difference `json:"benign,omitempty"`
}

// FixtureProof is proofs/fixture-clean-start.json or proofs/fixture-clean-end.json.
type FixtureProof struct {
	SchemaVersion   string        `json:"schema_version"`
	RunID           string        `json:"run_id"`
	Kind            string        `json:"kind"`
	FixturePath     string        `json:"fixture_path"`
	Commit          string        `json:"commit"`
	Tree            string        `json:"tree"`
	ExpectedTree    string        `json:"expected_tree"`
	TreeMatches     bool          `json:"tree_matches"`
	Clean           bool          `json:"clean"`
	Status          []StatusEntry `json:"status"`
	Problems        []string      `json:"problems"`
	SymlinksOutside []string      `json:"symlinks_outside"`
	// GitChanges is what changed under the fixture's .git while Case ran
	// (clean_end only; the harness never reads or trusts it, but a later
	// git command in the fixture would). GitChangesTotal counts them all
	// when the list is capped.
	GitChanges      []GitChange `json:"git_changes"`
	GitChangesTotal int         `json:"git_changes_total"`
	// GitChangesAllowed is set when the task let Case change any part of
	// the .git (fixture_git: allow): unsafe changes are listed, not problems.
	GitChangesAllowed bool `json:"git_changes_allowed,omitempty"`
	// Ignored lists what Case left in the worktree that the result commit
	// leaves out (paths a .gitignore excludes): never verified, but named.
	Ignored      []Leftover `json:"ignored"`
	IgnoredTotal int        `json:"ignored_total"`
	// NotTaken says why the proof was not taken (the fixture has no
	// baseline to compare with); such a proof is never clean and blames
	// nothing on Case.
	NotTaken string    `json:"not_taken,omitempty"`
	TakenAt  time.Time `json:"taken_at"`
}

// GitChange is one entry of the fixture's .git that Case added, removed or
// changed. Unsafe is set when it is not one of the files git itself writes
// in everyday use (index, objects, branch and tag refs, logs, HEAD): such a
// change could make a later git command run Case's code or show other
// content, and the run is blocked.
type GitChange struct {
	Path   string    `json:"path"`
	Change string    `json:"change"`
	Type   EntryType `json:"type"`
	Unsafe bool      `json:"unsafe"`
}

// How a .git entry changed while Case ran (GitChange.Change).
const (
	GitChangeAdded   = "added"
	GitChangeRemoved = "removed"
	GitChangeChanged = "changed"
)

// Leftover is a file Case left in the worktree outside the result commit.
// SHA256 is empty when the file was over the hashing budget or not a
// regular file.
type Leftover struct {
	Path   string    `json:"path"`
	Type   EntryType `json:"type"`
	Size   int64     `json:"size"`
	SHA256 string    `json:"sha256"`
}

// Pack holds the proof's manifest packed (PackedManifest) instead of as
// entries, once the proof is written: Manifest is then nil, and Entries,
// EachEntry and EntryCount read the packed form. A packed proof is not
// for marshalling.
func (p *SourceProof) Pack() {
	if p.Manifest != nil {
		p.Packed, p.Manifest = PackManifest(p.Manifest), nil
	}
}

// Entries is the proof's manifest as a slice: Manifest itself, or a fresh
// copy unpacked from Packed.
func (p *SourceProof) Entries() []ManifestEntry {
	if p.Packed != nil {
		return p.Packed.Unpack()
	}
	return p.Manifest
}

// EntryCount is the number of manifest entries, packed or not.
func (p *SourceProof) EntryCount() int {
	if p.Packed != nil {
		return p.Packed.Len()
	}
	return len(p.Manifest)
}
