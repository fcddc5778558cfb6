package egress

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"
)

// tlsRecordHandshake is the first byte of a TLS handshake record.
const tlsRecordHandshake = 0x16

// maxHello bounds how much of a ClientHello is read before giving up.
const maxHello = 64 << 10

// errNotTLS: the first bytes are not a TLS handshake.
var errNotTLS = errors.New("not TLS")

// peekHello looks at the first bytes the client sent. It returns whether
// they start a TLS handshake and, if so, the SNI of its ClientHello. Nothing
// is consumed: br still holds every byte for the upstream. TLS is never
// terminated; crypto/tls only parses the hello from the buffered copy.
func peekHello(br *bufio.Reader) (isTLS bool, sni string, err error) {
	first, err := br.Peek(1)
	if err != nil {
		return false, "", err
	}
	if first[0] != tlsRecordHandshake {
		return false, "", nil
	}
	var name string
	var seen bool
	rd := &peekReader{br: br}
	herr := tls.Server(helloConn{r: rd}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			name, seen = h.ServerName, true
			return nil, errHelloRead
		},
	}).Handshake()
	if !seen {
		return true, "", errors.Join(errors.New("no complete TLS ClientHello"), herr)
	}
	return true, name, nil
}

var errHelloRead = errors.New("hello read")

// peekReader reads br through Peek, so the bytes stay in the buffer.
type peekReader struct {
	br  *bufio.Reader
	off int
}

func (p *peekReader) Read(b []byte) (int, error) {
	if p.off >= maxHello {
		return 0, io.ErrUnexpectedEOF
	}
	want := min(p.off+len(b), maxHello)
	// Peek blocks until want bytes are buffered; ask only for one more byte
	// than is already there when the client is slow.
	if buf := p.br.Buffered(); want > buf {
		want = max(buf, p.off+1)
	}
	data, err := p.br.Peek(want)
	n := copy(b, data[min(p.off, len(data)):])
	p.off += n
	if n > 0 {
		return n, nil
	}
	return 0, err
}

// helloConn is a net.Conn that only reads; the handshake stops before it
// ever needs to write.
type helloConn struct {
	net.Conn
	r io.Reader
}

func (c helloConn) Read(b []byte) (int, error)         { return c.r.Read(b) }
func (c helloConn) Write(b []byte) (int, error)        { return 0, io.ErrClosedPipe }
func (c helloConn) Close() error                       { return nil }
func (c helloConn) LocalAddr() net.Addr                { return &net.TCPAddr{} }
func (c helloConn) RemoteAddr() net.Addr               { return &net.TCPAddr{} }
func (c helloConn) SetDeadline(t time.Time) error      { return nil }
func (c helloConn) SetReadDeadline(t time.Time) error  { return nil }
func (c helloConn) SetWriteDeadline(t time.Time) error { return nil }
