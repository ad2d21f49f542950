package http

import (
	"crypto/tls"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/plantgate/plantgate/host"
)

// The Server serves HTTPS when the listener given to Serve is a TLS one
// (tls.NewListener): fasthttp completes the handshake under ReadTimeout
// and WriteTimeout, and from then on every request goes the way a plain
// one goes (framing checks, limits, idle timeout). What TLS adds is here:
// a connection whose handshake failed, and the client certificate's name.

// handshakeFailed handles a read error on a TLS connection whose handshake
// did not complete, and reports whether it did. No request was read, so
// there is nothing to answer in HTTP and no access line or request metric
// to write: fasthttp's handler would otherwise answer 400 into a
// connection that speaks no TLS. The one exception is a client that sent
// plain HTTP to the HTTPS port: it is told so, in the Error body, as
// net/http tells it.
func (s *Server) handshakeFailed(fctx *fasthttp.RequestCtx, err error) bool {
	tc, ok := fctx.Conn().(*tls.Conn)
	if !ok || tc.ConnectionState().HandshakeComplete {
		return false
	}
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) && rh.Conn != nil && looksLikeHTTP(rh.RecordHeader) {
		body := AppendError(nil, &host.Error{Code: host.ErrBadRequest, Message: "this listener speaks HTTPS: use an https:// URL"})
		_ = rh.Conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = io.WriteString(rh.Conn, "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: "+
			strconv.Itoa(len(body))+"\r\n\r\n"+string(body))
	}
	if s.cfg.HandshakeFailed != nil {
		s.cfg.HandshakeFailed(err)
	}
	s.cfg.Logger.Debug("TLS handshake failed", "remote", fctx.RemoteAddr().String(), "err", err)
	_ = tc.Close()
	return true
}

// looksLikeHTTP reports whether a TLS record header is the start of an
// HTTP/1 request line (the methods the API serves, and the other common
// ones a stray client sends).
func looksLikeHTTP(h [5]byte) bool {
	switch string(h[:]) {
	case "GET /", "HEAD ", "POST ", "PUT /", "DELET", "OPTIO", "PATCH", "CONNE", "TRACE":
		return true
	}
	return false
}

// clientName is the subject of the client certificate the connection
// presented (mTLS), or "" on a plain connection or without one.
func clientName(c *fiber.Ctx) string {
	tc, ok := c.Context().Conn().(*tls.Conn)
	if !ok {
		return ""
	}
	st := tc.ConnectionState()
	if len(st.PeerCertificates) == 0 {
		return ""
	}
	return st.PeerCertificates[0].Subject.String()
}
