package source

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Spill moves the packed manifest of p, a proof already written to the
// evidence, to path, a new file in the run's own workspace, and lets the
// bytes go from memory: the run needs them again only at the after-proof,
// and in between Case works and the after-proof's walk and the index are
// what the harness holds (a million entries would keep 29 MiB for
// nothing). The bytes' digest stays with p, so what Restored reads back
// is held to it; nothing else is trusted about the file.
func Spill(p *ctoharness.SourceProof, path string, tr ctoharness.Tracer) error {
	if p.Packed == nil || p.Packed.Where() != "" {
		return fmt.Errorf("spill the source proof to %s: it is not packed, or already set aside", path)
	}
	tr.Trace(ctoharness.TraceWrite, path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("set the source proof's manifest aside: %w", err)
	}
	kept := p.Packed
	chunks := p.Packed.Detach(path)
	for _, c := range chunks {
		if _, err = f.Write(c); err != nil {
			break
		}
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// The bytes stay where they were: the after-proof is still
		// compared with the proof this run took.
		_ = os.Remove(path)
		back, aerr := kept.Attached(bytes.Join(chunks, nil))
		if aerr != nil {
			return fmt.Errorf("set the source proof's manifest aside in %s: %w (and taking it back: %v)", path, err, aerr)
		}
		p.Packed = back
		return fmt.Errorf("set the source proof's manifest aside in %s: %w", path, err)
	}
	return nil
}

// Restored is p with its manifest's bytes back from where Spill put them
// (p itself when they were never set aside); p is left as it is, so
// callers on other goroutines may each restore their own. The file must
// hold exactly the bytes set aside (length and SHA-256), or the error
// wraps ctoharness.ErrDetachedChanged: a run then cannot say what the
// source held before.
func Restored(p *ctoharness.SourceProof) (*ctoharness.SourceProof, error) {
	where := p.Packed.Where()
	if where == "" {
		return p, nil
	}
	f, err := os.OpenFile(where, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("read the source proof's manifest back: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() != int64(p.Packed.Bytes()) {
		return nil, fmt.Errorf("read the source proof's manifest back from %s: %w", where, ctoharness.ErrDetachedChanged)
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, fmt.Errorf("read the source proof's manifest back from %s: %w", where, err)
	}
	packed, err := p.Packed.Attached(data)
	if err != nil {
		return nil, err
	}
	out := *p
	out.Packed = packed
	return &out, nil
}
