package snapshot

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness/fixture"
	"github.com/cto-harness/cto-harness/harness/source"
)

// build writes the snapshot in a temporary directory beside dir and
// renames it into place, so that dir is either absent or whole. The caller
// holds the key's lock exclusively.
func build(ctx context.Context, in Input, key, dir string) error {
	tmp, err := os.MkdirTemp(in.Root, ".make-"+key+"-")
	if err != nil {
		return failed(err, "create a directory to make the snapshot in %s", in.Root)
	}
	in.Tracer.Trace(ctoharness.TraceWrite, tmp)
	done := false
	defer func() {
		if !done {
			in.Tracer.Trace(ctoharness.TraceRemove, tmp)
			_ = removeTree(tmp)
		}
	}()
	treeDir := filepath.Join(tmp, TreeDir)
	t, err := fixture.WriteTree(ctx, fixture.TreeInput{SourceRoot: in.SourceRoot, SourceGitDir: in.SourceGitDir, Commit: in.Commit,
		Checkout: in.Checkout, Dest: treeDir, Tracer: in.Tracer, Progress: in.Progress})
	if errors.Is(err, fixture.ErrAdoptNeedsCopy) {
		return fmt.Errorf("%w: %v", ErrNeedsCopy, err)
	}
	if err != nil {
		return err
	}
	if t.Tree != in.Tree {
		return failed(nil, "the commit %s has the tree %s, not %s", in.Commit, t.Tree, in.Tree)
	}
	// The index is written now and let go: the listing walk below is the
	// first run's largest on a big tree.
	indexSum, err := writeIndex(filepath.Join(tmp, IndexFile), t.Index)
	if err != nil {
		return failed(err, "write the snapshot's tree index in %s", tmp)
	}
	t.Index = nil
	// The last write to the tree directory: the listing is taken after it.
	if err := os.Chmod(treeDir, 0o555); err != nil {
		return failed(err, "make the snapshot's tree %s read-only", treeDir)
	}
	listing, err := source.ManifestPacked(ctx, treeDir)
	if err != nil {
		return failed(err, "list the snapshot's tree %s", treeDir)
	}
	rec := Record{Version: recordVersion, Key: key, Tree: t.Tree, MadeFrom: t.Commit, Conversions: in.Checkout.Digest(),
		Files: t.Files, Bytes: t.Bytes, Listing: source.PackedDigest(listing), TreeIndex: indexSum, Submodules: t.Submodules, SigningKeyID: in.keyID(), MadeAt: in.Now().UTC()}
	if rec.Submodules == nil {
		rec.Submodules = []string{}
	}
	if err := writeRecord(ctx, tmp, rec, listing, in.Signer); err != nil {
		return failed(err, "write the snapshot's record in %s", tmp)
	}
	if err := os.Chmod(tmp, 0o555); err != nil {
		return failed(err, "make the snapshot %s read-only", tmp)
	}
	in.Tracer.Trace(ctoharness.TraceWrite, dir)
	if err := os.Rename(tmp, dir); err != nil {
		return failed(err, "move the snapshot %s into place at %s", tmp, dir)
	}
	done = true
	return nil
}

// writeRecord writes record.json, listing.json and, with a signer, the
// record's signature: a DSSE envelope over an in-toto statement whose
// subjects are both files and whose predicate is the record.
func writeRecord(ctx context.Context, dir string, rec Record, listing *ctoharness.PackedManifest, signer *attest.Signer) error {
	recData, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	recData = append(recData, '\n')
	listSum, err := writeListing(filepath.Join(dir, ListingFile), listing)
	if err != nil {
		return err
	}
	files := map[string][]byte{RecordFile: recData}
	if signer != nil {
		payload, err := attest.NewStatement([]attest.Subject{{Name: RecordFile, SHA256: sum(recData)}, {Name: ListingFile, SHA256: listSum}, {Name: IndexFile, SHA256: rec.TreeIndex}},
			PredicateType, rec)
		if err != nil {
			return err
		}
		if files[EnvelopeFile], err = attest.Sign(ctx, signer, payload); err != nil {
			return err
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o444); err != nil {
			return err
		}
	}
	return nil
}

// writeListing writes listing to path as json.Marshal would, entry by
// entry, and returns the file's sha256: a listing of a million files is
// never held as one document beside the entries it encodes.
func writeListing(path string, listing *ctoharness.PackedManifest) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(f, h), 64<<10)
	err = encodeListing(w, listing)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write the snapshot's listing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeIndex writes the tree's index to path, read-only, and returns its
// sha256.
func writeIndex(path string, x *fixture.TreeIndex) (string, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = x.WriteTo(io.MultiWriter(f, h))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// readIndex reads the tree's index at path and checks it is of the
// digest want and of the tree.
func readIndex(path, want, tree string) (*fixture.TreeIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	x, err := fixture.ReadTreeIndex(io.TeeReader(f, h))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return nil, fmt.Errorf("%s has the digest %s, its record says %s", path, got, want)
	}
	if x.Root() != tree {
		return nil, fmt.Errorf("%s is the index of the tree %s, not %s", path, x.Root(), tree)
	}
	return x, nil
}

// encodeListing writes the bytes json.Marshal(listing) gives: null, or the
// entries, each as json.Marshal encodes it, between brackets and commas.
func encodeListing(w *bufio.Writer, listing *ctoharness.PackedManifest) error {
	if listing == nil {
		_, err := w.WriteString("null")
		return err
	}
	w.WriteByte('[')
	first := true
	for e := range listing.All() {
		if !first {
			w.WriteByte(',')
		}
		first = false
		data, err := json.Marshal(&e)
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	_, err := w.WriteString("]")
	return err
}

// load reads the snapshot at dir and checks it: the record intact (and
// signed by the run's key when the run has one), for this key and tree,
// and the tree directory's listing, taken now, the one it records.
func load(ctx context.Context, in Input, key, dir string) (*Snapshot, error) {
	recPath := filepath.Join(dir, RecordFile)
	in.Tracer.Trace(ctoharness.TraceRead, recPath)
	recData, err := os.ReadFile(recPath)
	if err != nil {
		return nil, changed(err, dir, "read the snapshot's record %s", recPath)
	}
	var rec Record
	dec := json.NewDecoder(bytes.NewReader(recData))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return nil, changed(err, dir, "the snapshot's record %s is not a snapshot record", recPath)
	}
	if in.Signer != nil {
		if err := checkSignature(ctx, dir, recData, in.Signer.Public()); err != nil {
			return nil, changed(err, dir, "the snapshot's record %s is not signed by this run's key %s", recPath, in.keyID())
		}
	}
	if rec.Version != recordVersion || rec.Key != key || rec.Tree != in.Tree || rec.Conversions != in.Checkout.Digest() || rec.SigningKeyID != in.keyID() {
		return nil, changed(nil, dir, "the snapshot's record %s is of version %d, key %s, tree %s, conversions %s, signing key %q; this run needs version %d, key %s, tree %s, conversions %s, key %q",
			recPath, rec.Version, rec.Key, rec.Tree, rec.Conversions, rec.SigningKeyID, recordVersion, key, in.Tree, in.Checkout.Digest(), in.keyID())
	}
	treeDir := filepath.Join(dir, TreeDir)
	in.Tracer.Trace(ctoharness.TraceWalk, treeDir)
	listing, err := source.ManifestPacked(ctx, treeDir)
	if err != nil {
		return nil, changed(err, dir, "list the snapshot's tree %s", treeDir)
	}
	if got := source.PackedDigest(listing); got != rec.Listing {
		return nil, changed(nil, dir, "the listing of the snapshot's tree %s has the digest %s, its record says %s (%s)", treeDir, got, rec.Listing, firstChange(dir, listing.Unpack()))
	}
	indexPath := filepath.Join(dir, IndexFile)
	in.Tracer.Trace(ctoharness.TraceRead, indexPath)
	index, err := readIndex(indexPath, rec.TreeIndex, rec.Tree)
	if err != nil {
		return nil, changed(err, dir, "read the snapshot's tree index")
	}
	return &Snapshot{Key: key, Dir: dir, Record: rec, RecordDigest: sum(recData), Listing: listing, Index: index}, nil
}

// checkSignature verifies record.dsse.json: signed by key, of the
// snapshot predicate, naming record.json with the digest of recData.
func checkSignature(ctx context.Context, dir string, recData []byte, key attest.PublicKey) error {
	data, err := os.ReadFile(filepath.Join(dir, EnvelopeFile))
	if err != nil {
		return err
	}
	env, err := attest.ParseEnvelope(data)
	if err != nil {
		return err
	}
	if _, err := env.Verify(ctx, []attest.PublicKey{key}); err != nil {
		return err
	}
	st, err := attest.ParseStatement(env.Payload)
	if err != nil {
		return err
	}
	if st.PredicateType != PredicateType {
		return fmt.Errorf("%s is of the predicate type %q, not %q", EnvelopeFile, st.PredicateType, PredicateType)
	}
	for _, s := range st.Subjects {
		if s.Name == RecordFile && s.SHA256 == sum(recData) {
			return nil
		}
	}
	return fmt.Errorf("%s does not name %s with the digest %s", EnvelopeFile, RecordFile, sum(recData))
}

// firstChange names the first path whose lstat differs from listing.json,
// for the blocker's message (the digest check is what decides).
func firstChange(dir string, now []ctoharness.ManifestEntry) string {
	data, err := os.ReadFile(filepath.Join(dir, ListingFile))
	var then []ctoharness.ManifestEntry
	if err != nil || json.Unmarshal(data, &then) != nil {
		return "its listing.json cannot be read either"
	}
	for i := 0; i < len(now) || i < len(then); i++ {
		switch {
		case i >= len(now):
			return "missing: " + then[i].Path
		case i >= len(then):
			return "added: " + now[i].Path
		default:
			// The device and owner are not in the listing's JSON.
			n := now[i]
			n.Dev, n.UID, n.GID = 0, 0, 0
			if !n.Equal(then[i]) {
				return "changed: " + n.Path
			}
		}
	}
	return "listing.json matches the tree, so the record was changed"
}

func sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}
