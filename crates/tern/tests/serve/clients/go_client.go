// Three POSTs with Go's net/http on one kept-alive connection, over HTTP/2
// (ALPN h2) or HTTP/1.1; prints one JSON line per response. With a client
// certificate (mTLS tests), the certificate is presented and each request
// also carries a forged Client-Cert field, which must never reach the
// backend.
// Usage: go run go_client.go URL CA_FILE h1|h2 [CERT_CHAIN KEY]
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	pem, err := os.ReadFile(os.Args[2])
	if err != nil {
		fail(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	config := &tls.Config{RootCAs: pool}
	mtls := len(os.Args) > 5
	if mtls {
		cert, err := tls.LoadX509KeyPair(os.Args[4], os.Args[5])
		if err != nil {
			fail(err)
		}
		config.Certificates = []tls.Certificate{cert}
	}
	transport := &http.Transport{TLSClientConfig: config, ForceAttemptHTTP2: true}
	if os.Args[3] == "h1" {
		// A non-nil, empty TLSNextProto is how net/http is told: no HTTP/2.
		transport.ForceAttemptHTTP2 = false
		transport.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	client := &http.Client{Transport: transport}
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("POST", os.Args[1], bytes.NewReader(bytes.Repeat([]byte("x"), 1000)))
		req.Header.Set("X-Forwarded-For", "6.6.6.6")
		if mtls {
			req.Header.Set("Client-Cert", ":Zm9yZ2Vk:")
		}
		r, err := client.Do(req)
		if err != nil {
			fail(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		var body any
		if err := json.Unmarshal(b, &body); err != nil {
			fail(fmt.Errorf("%v: %s", err, b))
		}
		out, _ := json.Marshal(map[string]any{"status": r.StatusCode, "proto": r.Proto, "body": body})
		fmt.Println(string(out))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
