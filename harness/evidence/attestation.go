package evidence

// Attestation is the signed in-toto attestation of a run. It is written
// after report.json and report.sha256 and covers every other file, so it is
// not among the artifact digests.
const Attestation = "attestation.dsse.json"

// WriteAttestation writes the attestation atomically. Its write is traced
// ahead of time, like the report's, because the trace is flushed before it.
func (d *Dir) WriteAttestation(data []byte) error { return d.put(Attestation, data) }
