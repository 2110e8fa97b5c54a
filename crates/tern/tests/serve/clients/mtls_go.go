// One GET with Go's net/http presenting a client certificate and a forged
// Client-Cert field; prints the status and the backend's echo as one JSON
// line. Usage: go run mtls_go.go URL CA_FILE CERT_CHAIN KEY
package main

import (
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
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	cert, err := tls.LoadX509KeyPair(os.Args[3], os.Args[4])
	if err != nil {
		fail(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs:      roots,
		Certificates: []tls.Certificate{cert},
	}}}
	req, err := http.NewRequest("GET", os.Args[1], nil)
	if err != nil {
		fail(err)
	}
	req.Header.Set("Client-Cert", ":Zm9yZ2Vk:")
	resp, err := client.Do(req)
	if err != nil {
		fail(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		fail(err)
	}
	var echo any
	if err := json.Unmarshal(body, &echo); err != nil {
		fail(err)
	}
	out, _ := json.Marshal(map[string]any{"status": resp.StatusCode, "body": echo})
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
