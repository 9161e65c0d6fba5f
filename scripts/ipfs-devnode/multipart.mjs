// A small streaming multipart/form-data parser for /api/v0/add.
//
// Kubo clients (ipfshttpclient, kubo-rpc-client, curl -F) stream uploads as multipart bodies
// that can be far larger than memory, so parts are yielded as async byte streams that read
// straight from the request; nothing is buffered beyond one network chunk plus a boundary.

const CRLF = Buffer.from('\r\n')
const HEADER_END = Buffer.from('\r\n\r\n')
const MAX_HEADER_BYTES = 16 * 1024

export class MultipartError extends Error {}

/** Return the boundary of a multipart Content-Type header, or throw MultipartError. */
export function boundaryOf (contentType) {
  const type = (contentType ?? '').split(';')[0].trim().toLowerCase()
  if (!type.startsWith('multipart/')) {
    throw new MultipartError('file argument \'path\' is required (expected a multipart/form-data body)')
  }
  const match = /;\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType)
  if (match == null) throw new MultipartError('multipart body has no boundary')
  return match[1] ?? match[2]
}

/** Pulls bytes from an async iterable of Buffers into a sliding window. */
class Window {
  constructor (source) {
    this.iterator = source[Symbol.asyncIterator]()
    this.buf = Buffer.alloc(0)
    this.ended = false
  }

  async fill () {
    if (this.ended) return false
    const { value, done } = await this.iterator.next()
    if (done) {
      this.ended = true
      return false
    }
    this.buf = this.buf.length === 0 ? Buffer.from(value) : Buffer.concat([this.buf, value])
    return true
  }

  /** Make sure at least n bytes are buffered; false if the stream ends first. */
  async need (n) {
    while (this.buf.length < n) {
      if (!await this.fill()) return false
    }
    return true
  }

  take (n) {
    const head = this.buf.subarray(0, n)
    this.buf = this.buf.subarray(n)
    return head
  }
}

function parseHeaders (block) {
  const headers = {}
  for (const line of block.toString('utf8').split('\r\n')) {
    const colon = line.indexOf(':')
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  return headers
}

function dispositionParam (disposition, name) {
  const match = new RegExp(`;\\s*${name}="([^"]*)"`, 'i').exec(disposition ?? '')
  if (match == null) return ''
  try {
    return decodeURIComponent(match[1])
  } catch {
    return match[1]
  }
}

/**
 * Yield the parts of a multipart body as { headers, name, filename, contentType, body }.
 * `body` is an async iterable of Buffers; a part not read to the end is drained before the
 * next part is yielded.
 */
export async function * parseMultipart (source, boundary) {
  const win = new Window(source)
  const opening = Buffer.from(`--${boundary}`)
  const delimiter = Buffer.from(`\r\n--${boundary}`)

  // Skip any preamble up to the first boundary line.
  for (;;) {
    const at = win.buf.indexOf(opening)
    if (at >= 0) {
      win.take(at + opening.length)
      break
    }
    if (win.buf.length > opening.length) win.take(win.buf.length - opening.length)
    if (!await win.fill()) throw new MultipartError('multipart body has no opening boundary')
  }

  for (;;) {
    if (!await win.need(2)) throw new MultipartError('multipart body ended after a boundary')
    const after = win.take(2).toString('latin1')
    if (after === '--') return
    if (after !== '\r\n') throw new MultipartError('malformed multipart boundary line')

    let headerEnd
    for (;;) {
      headerEnd = win.buf.indexOf(HEADER_END)
      // A part with no headers at all starts directly with the blank line.
      if (win.buf.subarray(0, 2).equals(CRLF)) headerEnd = -2
      if (headerEnd !== -1) break
      if (win.buf.length > MAX_HEADER_BYTES) throw new MultipartError('multipart part headers too large')
      if (!await win.fill()) throw new MultipartError('multipart body ended inside part headers')
    }
    const headers = headerEnd === -2 ? {} : parseHeaders(win.take(headerEnd))
    win.take(headerEnd === -2 ? 2 : HEADER_END.length)

    // One piece of this part's body, or null at its end (the delimiter is left unread).
    let finished = false
    const nextPiece = async () => {
      for (;;) {
        if (finished) return null
        const at = win.buf.indexOf(delimiter)
        if (at >= 0) {
          const piece = win.take(at)
          win.take(2) // leave "--boundary" for the outer loop
          finished = true
          if (piece.length > 0) return piece
          return null
        }
        // Keep a tail that might be the start of a delimiter split across chunks.
        const safe = win.buf.length - (delimiter.length - 1)
        if (safe > 0) return win.take(safe)
        if (!await win.fill()) throw new MultipartError('multipart body ended inside a part')
      }
    }
    const body = (async function * () {
      for (let piece = await nextPiece(); piece != null; piece = await nextPiece()) yield piece
    })()

    const disposition = headers['content-disposition'] ?? ''
    yield {
      headers,
      name: dispositionParam(disposition, 'name'),
      filename: dispositionParam(disposition, 'filename'),
      contentType: (headers['content-type'] ?? '').toLowerCase(),
      body
    }
    while (await nextPiece() != null) { /* drain what the consumer left unread */ }
    win.take(opening.length)
  }
}
