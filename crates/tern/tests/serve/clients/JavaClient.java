// Three POSTs with Java's java.net.http.HttpClient on one client (one
// kept-alive connection); prints one JSON line per response.
// Usage: java JavaClient.java URL CA_FILE h1|h2
import java.io.FileInputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

public class JavaClient {
    public static void main(String[] args) throws Exception {
        KeyStore trust = KeyStore.getInstance(KeyStore.getDefaultType());
        trust.load(null, null);
        try (FileInputStream pem = new FileInputStream(args[1])) {
            int i = 0;
            for (Certificate ca : CertificateFactory.getInstance("X.509").generateCertificates(pem)) {
                trust.setCertificateEntry("ca" + i++, ca);
            }
        }
        TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
        tmf.init(trust);
        SSLContext tls = SSLContext.getInstance("TLS");
        tls.init(null, tmf.getTrustManagers(), null);
        HttpClient.Version version = args[2].equals("h2") ? HttpClient.Version.HTTP_2 : HttpClient.Version.HTTP_1_1;
        HttpClient client = HttpClient.newBuilder()
                .sslContext(tls)
                .version(version)
                .connectTimeout(Duration.ofSeconds(10))
                .build();
        String body = "x".repeat(1000);
        for (int i = 0; i < 3; i++) {
            HttpRequest request = HttpRequest.newBuilder(URI.create(args[0]))
                    .timeout(Duration.ofSeconds(20))
                    // X-Forwarded-For is not a restricted header in HttpClient.
                    .header("X-Forwarded-For", "6.6.6.6")
                    .POST(HttpRequest.BodyPublishers.ofString(body))
                    .build();
            HttpResponse<String> response = client.send(request, HttpResponse.BodyHandlers.ofString());
            String proto = response.version() == HttpClient.Version.HTTP_2 ? "HTTP/2.0" : "HTTP/1.1";
            // The body is the backend's JSON echo: embed it as it is.
            System.out.println("{\"status\":" + response.statusCode() + ",\"proto\":\"" + proto + "\",\"body\":" + response.body() + "}");
        }
    }
}
