"""The API server's HTTP layer, one module per concern.

`apiserver` is the entry point (one catch-all aiohttp handler: authenticate, inject faults,
authorise, dispatch) and the object verbs; `paths` parses a request the way the apiserver's
RequestInfoFactory does; `auth` authenticates, impersonates and authorises; `reviews` answers
TokenRequest and the access, rules, token and self-subject reviews; `watch` streams watch
events; `tables` renders kubectl's Tables; `nonresource` serves discovery, /version and the
health paths; `admin` is the `/_emulator` endpoint; `wire` holds the JSON and body helpers they
share. Every body is compact single-line JSON; every error a Status.
"""
