// Kubo RPC plumbing shared by the commands: option parsing the way Kubo (Go) does it, and
// Kubo's response and error shapes.

import { CID } from 'multiformats/cid'

export const CODE_NORMAL = 0
export const CODE_CLIENT = 1

export class RpcError extends Error {
  constructor (message, { status = 500, code = CODE_NORMAL } = {}) {
    super(message)
    this.status = status
    this.code = code
  }
}

export const badArg = (message) => new RpcError(message, { status: 400, code: CODE_CLIENT })

// --- request helpers -----------------------------------------------------------------

export function flag (query, name, fallback) {
  const value = query.get(name)
  if (value == null) return fallback
  // Go's strconv.ParseBool, which Kubo uses (ipfshttpclient sends "True"/"False").
  if (['', '1', 't', 'T', 'TRUE', 'true', 'True'].includes(value)) return true
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(value)) return false
  throw badArg(`invalid value for option "${name}": ${value} (expected true or false)`)
}

export function intOption (query, name, fallback) {
  const value = query.get(name)
  if (value == null) return fallback
  if (!/^\d+$/.test(value)) throw badArg(`invalid value for option "${name}": ${value}`)
  return Number(value)
}

/** Parse a Go duration such as "500ms", "10s", "1m30s" (Kubo's global `timeout` option). */
export function parseDuration (text) {
  const units = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 }
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy
  let total = 0
  let seen = 0
  for (let m = re.exec(text); m != null; m = re.exec(text)) {
    total += Number(m[1]) * units[m[2]]
    seen = re.lastIndex
  }
  if (seen === 0 || seen !== text.length) throw badArg(`invalid duration "${text}"`)
  return total
}

export function requiredArg (args, name) {
  if (args.length === 0 || args[0] === '') throw badArg(`argument "${name}" is required`)
  return args[0]
}

export function parseCidArg (text) {
  const body = text.startsWith('/ipfs/') ? text.slice('/ipfs/'.length) : text
  if (body.includes('/')) {
    throw new RpcError(`invalid path "${text}": sub-paths are not supported by the dev node`)
  }
  try {
    return CID.parse(body)
  } catch (err) {
    throw new RpcError(`invalid path "${text}": ${err.message}`)
  }
}

// --- response helpers ----------------------------------------------------------------

export function sendJson (res, status, body) {
  const text = JSON.stringify(body) + '\n'
  res.writeHead(status, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(text),
    'Cache-Control': 'no-cache',
    'Server': 'truetrain-devnode'
  })
  res.end(text)
}

export function sendError (res, err) {
  const status = err.status ?? 500
  const body = { Message: err.message, Code: err.code ?? CODE_NORMAL, Type: 'error' }
  if (res.headersSent) {
    // Kubo encodes an error that happens mid-stream as one more JSON value in the stream.
    res.end(JSON.stringify(body) + '\n')
  } else {
    sendJson(res, status, body)
  }
}

export function startStream (res, contentType) {
  res.writeHead(200, {
    'Content-Type': contentType,
    'X-Chunked-Output': '1',
    'Trailer': 'X-Stream-Error',
    'Cache-Control': 'no-cache',
    'Server': 'truetrain-devnode'
  })
}

/** Translate Helia/abort errors into the messages Kubo uses for the same situation. */
export function kuboError (err, { signal, timeoutSignal, cid }) {
  if (err instanceof RpcError) return err
  if (timeoutSignal?.aborted) return new RpcError('context deadline exceeded')
  if (signal?.aborted) return new RpcError('context canceled')
  if (err?.name === 'BlockNotFoundWhileOfflineError' || err?.name === 'NotFoundError') {
    return new RpcError(`block was not found locally (offline): ipld: could not find ${cid ?? 'block'}`)
  }
  if (err?.name === 'NotUnixFSError') return new RpcError('not unixfs: this dag node is not a UnixFS file')
  return new RpcError(err?.message ?? String(err))
}
