// A second QUIC client for tern's benchmarks, written with quic-go (an
// implementation nobody at tern wrote): N new QUIC connections, each
// carrying one HTTP/3 GET, C at a time, optionally at a fixed rate.
// bench/h3-clients.sh runs it beside tern bench to see whether what a
// new QUIC connection costs the server depends on the client.
//
// -sockets picks how connections get their UDP sockets:
//
//	own     quic.DialAddr: a socket per connection and zero-length
//	        client connection IDs (as Chromium does)
//	shared  one quic.Transport per concurrent slot, reused for its
//	        connections, with quic-go's 4-byte client connection IDs
//	        (as quic-go's http3.Transport does by default)
//
// Only the URL given is ever a target. TLS 1.3, X25519 only, no session
// resumption (every handshake full), the certificate not verified (a
// test certificate).
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

type result struct {
	Connections int64   `json:"connections"`
	Failed      int64   `json:"failed"`
	Seconds     float64 `json:"seconds"`
	Sockets     string  `json:"sockets"`
	FirstError  string  `json:"first_error,omitempty"`
}

func main() {
	n := flag.Int("n", 1000, "connections to open (one request each)")
	c := flag.Int("c", 10, "connections at a time")
	rate := flag.Float64("rate", 0, "connections started per second (0: as fast as -c allows)")
	sockets := flag.String("sockets", "own", "own (a UDP socket per connection, zero-length client IDs) or shared (one per slot, 4-byte IDs)")
	timeout := flag.Duration("timeout", 10*time.Second, "bound on each connection and request")
	flag.Parse()
	if flag.NArg() != 1 || *n < 1 || *c < 1 || (*sockets != "own" && *sockets != "shared") {
		fmt.Fprintln(os.Stderr, "usage: quic-go-client [-n N] [-c C] [-rate R] [-sockets own|shared] https://HOST:PORT/PATH")
		os.Exit(2)
	}
	target, err := url.Parse(flag.Arg(0))
	if err != nil || target.Scheme != "https" {
		fmt.Fprintf(os.Stderr, "quic-go-client: %q is not an https:// URL\n", flag.Arg(0))
		os.Exit(2)
	}
	addr, err := net.ResolveUDPAddr("udp", target.Host)
	if err != nil {
		fmt.Fprintf(os.Stderr, "quic-go-client: %s: %v\n", target.Host, err)
		os.Exit(2)
	}
	tlsConf := &tls.Config{
		NextProtos:         []string{http3.NextProtoH3},
		MinVersion:         tls.VersionTLS13,
		CurvePreferences:   []tls.CurveID{tls.X25519},
		InsecureSkipVerify: true,
		ServerName:         target.Hostname(),
	}
	quicConf := &quic.Config{}

	// Tickets: one per connection to start, paced when -rate is set.
	tickets := make(chan struct{}, *c)
	go func() {
		defer close(tickets)
		var every time.Duration
		if *rate > 0 {
			every = time.Duration(float64(time.Second) / *rate)
		}
		next := time.Now()
		for i := 0; i < *n; i++ {
			if every > 0 {
				time.Sleep(time.Until(next))
				next = next.Add(every)
			}
			tickets <- struct{}{}
		}
	}()

	var done, failed atomic.Int64
	var firstError atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for slot := 0; slot < *c; slot++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var shared *quic.Transport
			if *sockets == "shared" {
				udp, err := net.ListenUDP("udp", nil)
				if err != nil {
					firstError.CompareAndSwap(nil, err.Error())
					return
				}
				shared = &quic.Transport{Conn: udp}
				defer shared.Close()
			}
			for range tickets {
				if err := once(target, addr, shared, tlsConf, quicConf, *timeout); err != nil {
					failed.Add(1)
					firstError.CompareAndSwap(nil, err.Error())
				} else {
					done.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	r := result{
		Connections: done.Load(),
		Failed:      failed.Load(),
		Seconds:     time.Since(start).Seconds(),
		Sockets:     *sockets,
	}
	if e, ok := firstError.Load().(string); ok {
		r.FirstError = e
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
	if r.Failed > 0 || r.Connections == 0 {
		os.Exit(1)
	}
}

// once opens a QUIC connection, sends one GET on it, reads the whole
// response and closes the connection.
func once(target *url.URL, addr *net.UDPAddr, shared *quic.Transport, tlsConf *tls.Config, quicConf *quic.Config, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var conn *quic.Conn
	var err error
	if shared != nil {
		conn, err = shared.Dial(ctx, addr, tlsConf, quicConf)
	} else {
		conn, err = quic.DialAddr(ctx, addr.String(), tlsConf, quicConf)
	}
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer conn.CloseWithError(0, "")
	h3 := (&http3.Transport{}).NewClientConn(conn)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target.String(), nil)
	if err != nil {
		return err
	}
	resp, err := h3.RoundTrip(req)
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("body: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}
