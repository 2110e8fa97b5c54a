# One GET with Python requests presenting a client certificate (when given)
# and a forged Client-Cert field; prints the status and the backend's echo
# as one JSON line. Usage: mtls_requests.py URL CA_FILE [CERT_CHAIN KEY]
import json
import sys

import requests

url, ca = sys.argv[1], sys.argv[2]
cert = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else None
r = requests.get(url, headers={"Client-Cert": ":Zm9yZ2Vk:"}, verify=ca, cert=cert)
print(json.dumps({"status": r.status_code, "body": r.json()}))
