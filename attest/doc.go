// Package attest makes evidence authentic, not only tamper-evident: ed25519
// keys, DSSE envelopes (github.com/secure-systems-lab/go-securesystemslib/dsse)
// holding in-toto Statement v1 documents (github.com/in-toto/attestation),
// whose subjects are evidence files with their sha256.
//
// Digests alone show that files agree with each other; anyone able to rewrite
// them all can recompute every digest. A signature by a key the consumer
// trusts shows that a holder of that key produced them.
package attest
