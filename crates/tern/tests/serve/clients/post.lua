-- wrk: every request a POST of 1000 bytes with a forged X-Forwarded-For.
-- Usage: wrk -s post.lua ... URL
wrk.method = "POST"
wrk.body = string.rep("x", 1000)
wrk.headers["Content-Type"] = "text/plain"
wrk.headers["X-Forwarded-For"] = "6.6.6.6"
