"""The read-only web explorer: jobs, tasks, workers, disputes and token flows in a browser.

``truetrain explorer`` serves it on 127.0.0.1:8600 by default. It reads the chain over
JSON-RPC and content over the Kubo RPC API and holds no key: nothing in it can send a
transaction. Every HTML page has a JSON twin under ``/api/``; the browser polls that twin
and refreshes the page's main part when the data changed.
"""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8600
