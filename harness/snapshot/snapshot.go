// Package snapshot keeps one read-only copy of a commit's tree per runs
// directory and key, which every sandboxed run at that commit shows Case as
// its fixture overlay's lower layer instead of the live source worktree. It
// is written once from the source's object store (package fixture's
// WriteTree: every blob hashed against the tree as it is written), so it is
// exactly the commit whatever the worktree does later, and its record holds
// the digest of the tree directory's lstat listing, signed with the run's
// key when there is one. A run reuses it after one lstat walk that must
// give the recorded listing again: any write since (content, mode, a file
// added or removed) changes a ctime, an inode or the set of paths.
//
// Layout, under RUNS_DIR/snapshots:
//
//	KEY/tree/           the files (git's checkout modes: the overlay shows them to Case)
//	KEY/record.json     the record (Record)
//	KEY/listing.json    the listing the record's digest is of, to name what changed
//	KEY/tree-index      the tree as it was walked (fixture.TreeIndex), whose digest the record holds
//	KEY/record.dsse.json  the record's signature, when a signing key is configured
//	KEY.lock            held shared by every run using KEY, exclusive while it is made or pruned; its mtime is the last use
//
// KEY/, KEY/tree/ and the record files are read-only (chmod a-w) once made.
// The directories and files below KEY/tree/ keep git's checkout modes: the
// overlay shows a lower file's mode to Case, whose commands hold no
// capability to write a file that is not writable.
package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness/fixture"
)

// Names below a runs directory and a snapshot.
const (
	DirName      = "snapshots"
	TreeDir      = "tree"
	RecordFile   = "record.json"
	ListingFile  = "listing.json"
	EnvelopeFile = "record.dsse.json"
	IndexFile    = "tree-index"
	lockSuffix   = ".lock"
	// PredicateType is the in-toto predicate type of a record's signature;
	// the predicate is the record itself.
	PredicateType = "https://cto-harness.invalid/attestation/snapshot/v1"
	// recordVersion 2: a tree with submodules has a snapshot (each an
	// empty directory, listed in Record.Submodules). 3: the tree's index
	// is kept with it (Record.TreeIndex).
	recordVersion = 3
)

// Root is where the runs directory runsDir keeps its snapshots: inside
// the runs directory, which every sandboxed command's view hides.
func Root(runsDir string) string { return filepath.Join(runsDir, DirName) }

// Key names the snapshot of a tree: what decides its bytes (the tree, and
// the digest of the checkout conversions' inputs, fixture.CheckoutInputs)
// and who vouches for its record (the signing key's id, "" when unsigned),
// so that a run never trusts a record its own key did not sign. Two commits
// with one tree share a snapshot; the commit is not part of it.
func Key(tree, conversions, signingKeyID string) string {
	h := sha256.New()
	fmt.Fprintf(h, "cto-harness-snapshot-v%d\ntree %s\nconversions %s\nkey %s\n", recordVersion, tree, conversions, signingKeyID)
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Record is record.json: what the snapshot is and the digest of its tree
// directory's lstat listing (source.ManifestDigest), taken after the last
// write to it.
type Record struct {
	Version     int    `json:"version"`
	Key         string `json:"key"`
	Tree        string `json:"tree"`
	MadeFrom    string `json:"made_from_commit"`
	Conversions string `json:"conversions_digest"`
	Files       int    `json:"files"`
	Bytes       int64  `json:"bytes"`
	Listing     string `json:"listing_digest"`
	// TreeIndex is the sha256 of tree-index, the tree as WriteTree walked
	// it: a run adopts the snapshot without reading the tree's objects.
	TreeIndex string `json:"tree_index_digest"`
	// Submodules are the tree's gitlinks, each an empty directory: a run
	// whose source populates one of them copies instead.
	Submodules []string `json:"submodules"`
	// SigningKeyID is the key record.dsse.json is signed with; "" when
	// the snapshot is unsigned (no signing key was configured).
	SigningKeyID string    `json:"signing_key_id"`
	MadeAt       time.Time `json:"made_at"`
}

// Input says which snapshot a run needs and how to make it.
type Input struct {
	Root         string // Root(runsDir)
	SourceRoot   string // the classified source worktree (never read)
	SourceGitDir string // its git directory; empty means SourceRoot/.git
	Commit, Tree string // the base commit and its tree (full hashes)
	// Checkout are the conversions' inputs read from the source.
	Checkout fixture.CheckoutInputs
	// Signer signs the record of a snapshot this run makes, and its
	// public key is the one a record must verify with; nil: unsigned.
	Signer   *attest.Signer
	Now      func() time.Time
	Tracer   ctoharness.Tracer
	Progress fixture.Progress // optional
}

func (in Input) keyID() string {
	if in.Signer == nil {
		return ""
	}
	return in.Signer.Public().ID
}

// Snapshot is one snapshot a run holds (Open) until it calls Release.
type Snapshot struct {
	Key string
	Dir string // RUNS_DIR/snapshots/KEY
	// Record and RecordDigest (sha256 of record.json) are what the run's
	// evidence names.
	Record       Record
	RecordDigest string
	// Listing is the tree directory's lstat listing, just taken and equal
	// to the recorded one: the fixture's files must show it. It is held
	// packed (a million entries in a few tens of MB) until an adoption
	// needs it.
	Listing *ctoharness.PackedManifest
	// Index is the tree's index, read now and of the recorded digest, for
	// the adoptions of the snapshot (fixture.CopyInput.TreeIndex).
	Index *fixture.TreeIndex
	// Made says this run wrote the snapshot (the first run at its key).
	Made bool
	lock *lock
}

// TreeDir is the directory the overlay shows.
func (s *Snapshot) TreeDir() string { return filepath.Join(s.Dir, TreeDir) }

// Release lets the snapshot go: prune may remove it once no run holds it.
// Calling it again, or on nil, does nothing.
func (s *Snapshot) Release() {
	if s == nil || s.lock == nil {
		return
	}
	s.lock.close()
	s.lock = nil
}
