// Three POSTs with Node's fetch (undici keeps the connection alive); prints
// one JSON line per response. Usage: node fetch_client.mjs URL
// (the test CA comes through NODE_EXTRA_CA_CERTS).
const url = process.argv[2];
for (let i = 0; i < 3; i++) {
  const r = await fetch(url, {
    method: "POST",
    body: "x".repeat(1000),
    headers: { "X-Forwarded-For": "6.6.6.6" },
  });
  console.log(JSON.stringify({ status: r.status, proto: "HTTP/1.1", body: await r.json() }));
}
