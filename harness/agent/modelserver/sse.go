package modelserver

import (
	"io"
	"net/http"
)

// sseWriter writes one Server-Sent Events stream.
type sseWriter struct{ w *statusWriter }

func startSSE(w *statusWriter) sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	return sseWriter{w}
}

// event writes one event: an "event:" line when name is set, then v as one
// JSON "data:" line (or raw when v is a string).
func (s sseWriter) event(name string, v any) {
	if name != "" {
		_, _ = io.WriteString(s.w, "event: "+name+"\n")
	}
	data, ok := v.(string)
	if !ok {
		data = compactJSON(v)
	}
	_, _ = io.WriteString(s.w, "data: "+data+"\n\n")
	s.w.Flush()
}
