// Three POSTs with Go's net/http (HTTP/2 over ALPN, one connection); prints
// one JSON line per response. Usage: go run go_client.go URL CA_FILE
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
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		ForceAttemptHTTP2: true,
	}}
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("POST", os.Args[1], bytes.NewReader(bytes.Repeat([]byte("x"), 1000)))
		req.Header.Set("X-Forwarded-For", "6.6.6.6")
		r, err := client.Do(req)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		var body any
		if err := json.Unmarshal(b, &body); err != nil {
			fmt.Fprintln(os.Stderr, err, string(b))
			os.Exit(1)
		}
		out, _ := json.Marshal(map[string]any{"status": r.StatusCode, "proto": r.Proto, "body": body})
		fmt.Println(string(out))
	}
}
