# Three POSTs on one requests.Session (one kept-alive connection); prints one
# JSON line per response. Usage: requests_client.py URL CA_FILE
import json
import sys

import requests

url, ca = sys.argv[1], sys.argv[2]
session = requests.Session()
for _ in range(3):
    r = session.post(url, data=b"x" * 1000, headers={"X-Forwarded-For": "6.6.6.6"}, verify=ca)
    print(json.dumps({"status": r.status_code, "proto": "HTTP/1.1", "body": r.json()}))
