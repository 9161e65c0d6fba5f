// The subset of the Kubo RPC API (https://docs.ipfs.tech/reference/kubo/rpc/) that truetrain
// uses, with Kubo's request and response shapes, served from a Helia node.
//
// Every command is POST (Kubo answers other methods with 405); options are query parameters,
// repeated `arg`s are the positional arguments; command errors are HTTP 500 (400 for bad
// arguments) with the body {"Message": "...", "Code": 0, "Type": "error"}.

import { depthFirstWalker } from '@helia/utils'
import { publicKeyToProtobuf } from '@libp2p/crypto/keys'
import { multiaddr } from '@multiformats/multiaddr'
import { CID } from 'multiformats/cid'
import {
  CODE_CLIENT, RpcError, badArg, flag, intOption, kuboError, parseCidArg, parseDuration, requiredArg, sendError, sendJson,
  startStream
} from './kubo-http.mjs'
import { boundaryOf, MultipartError, parseMultipart } from './multipart.mjs'

export const VERSION = '0.30.0-truetrain-devnode'
export { RpcError, sendError }

async function readBlock (helia, cid, options) {
  const chunks = []
  for await (const chunk of helia.blockstore.get(cid, options)) chunks.push(chunk)
  return Buffer.concat(chunks)
}

/** Kubo's add "Size": the cumulative size of the DAG, as the root's links record it. */
async function cumulativeSize (helia, cid) {
  const bytes = await readBlock(helia, cid, { offline: true })
  if (cid.code !== 0x70) return bytes.length
  const codec = await helia.getCodec(cid.code)
  const node = codec.decode(bytes)
  return node.Links.reduce((sum, link) => sum + (link.Tsize ?? 0), bytes.length)
}

// --- commands ------------------------------------------------------------------------

export function createRpc ({ helia, fs }) {
  async function pin (cid, { recursive = true, signal, offline = false } = {}) {
    if (await isRootPin(cid)) return // Kubo's pin add is idempotent; Helia's throws
    const options = { depth: recursive ? Infinity : 0, metadata: { cid: cid.toString() }, signal, offline }
    for await (const _ of helia.pins.add(cid, options)) { /* walks and records every block */ } // eslint-disable-line no-unused-vars
  }

  async function isRootPin (cid) {
    try {
      await helia.pins.get(cid)
      return true
    } catch {
      return false
    }
  }

  async function pinnedRoots () {
    const roots = []
    for await (const p of helia.pins.ls()) {
      const name = p.metadata?.cid ?? p.cid.toString()
      roots.push({ cid: CID.parse(name), name, type: p.depth === Infinity ? 'recursive' : 'direct' })
    }
    return roots
  }

  async function indirectOf (root) {
    const walker = depthFirstWalker()({ blockstore: helia.blockstore, getCodec: helia.getCodec })
    const found = []
    for await (const node of walker.walk(root, { depth: Infinity, offline: true })) {
      if (!node.block.cid.equals(root)) found.push(node.block.cid.toString())
    }
    return found
  }

  const commands = {
    async add ({ req, res, query, ctx }) {
      const unsupported = [['only-hash', 'only-hash'], ['wrap-with-directory', 'wrap-with-directory'],
        ['trickle', 'trickle'], ['inline', 'inline'], ['nocopy', 'nocopy']]
      for (const [name, label] of unsupported) {
        if (flag(query, name, false)) throw badArg(`option "${label}" is not supported by the dev node`)
      }
      const chunker = query.get('chunker')
      if (chunker != null && chunker !== '' && chunker !== 'size-262144') {
        throw badArg(`chunker "${chunker}" is not supported by the dev node (only size-262144)`)
      }
      const hash = query.get('hash')
      if (hash != null && hash !== '' && hash !== 'sha2-256') {
        throw badArg(`hash "${hash}" is not supported by the dev node (only sha2-256)`)
      }
      const pinIt = flag(query, 'pin', true)
      const cidVersion = intOption(query, 'cid-version', 0)
      if (cidVersion !== 0 && cidVersion !== 1) throw badArg(`unknown CID version ${cidVersion}`)
      const rawLeaves = flag(query, 'raw-leaves', cidVersion === 1)
      if (cidVersion === 0 && rawLeaves) throw badArg('raw-leaves requires cid-version 1 (CIDv0 has no raw codec)')
      // Kubo's defaults: 256 KiB chunks, balanced DAG of at most 174 links per node, dag-pb.
      // @helia/unixfs sets its own chunker and layout, so undefined lets the profile decide.
      const importOptions = {
        profile: 'unixfs-v0-2015', cidVersion, rawLeaves, chunker: undefined, layout: undefined, signal: ctx.signal
      }

      let boundary
      try {
        boundary = boundaryOf(req.headers['content-type'])
      } catch (err) {
        throw badArg(err.message)
      }
      let added = 0
      try {
        for await (const part of parseMultipart(req, boundary)) {
          if (part.contentType.startsWith('application/x-directory') || part.contentType.startsWith('multipart/')) {
            throw badArg('directories are not supported by the dev node: add files one by one')
          }
          const cid = await fs.addByteStream(part.body, importOptions)
          if (pinIt) await pin(cid, { signal: ctx.signal })
          const size = await cumulativeSize(helia, cid)
          if (!res.headersSent) startStream(res, 'application/json')
          const name = part.filename !== '' ? part.filename : cid.toString()
          res.write(JSON.stringify({ Name: name, Hash: cid.toString(), Size: String(size) }) + '\n')
          added++
        }
      } catch (err) {
        if (err instanceof MultipartError) throw badArg(err.message)
        throw err
      }
      if (added === 0) throw badArg('file argument \'path\' is required')
      res.end()
    },

    async cat ({ res, query, args, ctx }) {
      const cid = parseCidArg(requiredArg(args, 'ipfs-path'))
      const offset = intOption(query, 'offset', 0)
      const length = query.get('length') == null ? undefined : intOption(query, 'length', 0)
      const options = { signal: ctx.signal, offline: ctx.offline }
      ctx.cid = cid
      // Resolve the root before answering, so a missing or wrong CID is a proper error reply.
      const stat = await fs.stat(cid, options)
      if (stat.type === 'directory') throw new RpcError('this dag node is a directory')
      const size = Number(stat.size)
      const start = Math.min(offset, size)
      const count = length == null ? size - start : Math.min(length, size - start)
      res.writeHead(200, {
        'Content-Type': 'text/plain',
        'X-Stream-Output': '1',
        'X-Content-Length': String(count),
        'Trailer': 'X-Stream-Error',
        'Cache-Control': 'no-cache',
        'Server': 'truetrain-devnode'
      })
      if (count === 0) return res.end()
      try {
        for await (const chunk of fs.cat(cid, { ...options, offset: start, length: count })) {
          if (!res.write(chunk)) await new Promise((resolve) => res.once('drain', resolve))
        }
      } catch (err) {
        res.addTrailers({ 'X-Stream-Error': kuboError(err, ctx).message })
      }
      res.end()
    },

    async 'pin/add' ({ res, query, args, ctx }) {
      requiredArg(args, 'ipfs-path')
      const recursive = flag(query, 'recursive', true)
      const pinned = []
      for (const arg of args) {
        const cid = parseCidArg(arg)
        ctx.cid = cid
        await pin(cid, { recursive, signal: ctx.signal, offline: ctx.offline })
        pinned.push(cid.toString())
      }
      sendJson(res, 200, { Pins: pinned })
    },

    async 'pin/rm' ({ res, args, ctx }) {
      requiredArg(args, 'ipfs-path')
      const removed = []
      for (const arg of args) {
        const cid = parseCidArg(arg)
        if (!await isRootPin(cid)) throw new RpcError('not pinned or pinned indirectly')
        for await (const _ of helia.pins.rm(cid, { signal: ctx.signal })) { /* unpin each block */ } // eslint-disable-line no-unused-vars
        removed.push(cid.toString())
      }
      sendJson(res, 200, { Pins: removed })
    },

    async 'pin/ls' ({ res, query, args }) {
      const type = query.get('type') ?? 'all'
      if (!['all', 'recursive', 'direct', 'indirect'].includes(type)) {
        throw badArg(`invalid type '${type}', must be one of {direct, indirect, recursive, all}`)
      }
      const roots = await pinnedRoots()
      const keys = {}
      if (args.length > 0) {
        for (const arg of args) {
          const cid = parseCidArg(arg)
          const root = roots.find((r) => r.cid.equals(cid))
          if (root != null && (type === 'all' || type === root.type)) {
            keys[arg] = { Type: root.type }
          } else if ((type === 'all' || type === 'indirect') && await helia.pins.isPinned(cid)) {
            keys[arg] = { Type: 'indirect' }
          } else {
            throw new RpcError(`path '${arg}' is not pinned`)
          }
        }
      } else {
        for (const root of roots) {
          if (type === 'all' || type === root.type) keys[root.name] = { Type: root.type }
        }
        if (type === 'all' || type === 'indirect') {
          for (const root of roots.filter((r) => r.type === 'recursive')) {
            for (const child of await indirectOf(root.cid)) keys[child] ??= { Type: 'indirect' }
          }
        }
      }
      if (flag(query, 'stream', false)) {
        startStream(res, 'application/json')
        for (const [cid, { Type }] of Object.entries(keys)) res.write(JSON.stringify({ Cid: cid, Type }) + '\n')
        return res.end()
      }
      sendJson(res, 200, { Keys: keys })
    },

    async id ({ res, args }) {
      const self = helia.libp2p.peerId
      if (args.length > 0 && args[0] !== self.toString()) {
        throw new RpcError('the dev node only answers id for itself')
      }
      sendJson(res, 200, {
        ID: self.toString(),
        PublicKey: Buffer.from(publicKeyToProtobuf(self.publicKey)).toString('base64'),
        Addresses: helia.libp2p.getMultiaddrs().map((ma) => ma.toString()),
        AgentVersion: `truetrain-devnode/${VERSION} helia/${helia.info.version}`,
        Protocols: helia.libp2p.getProtocols()
      })
    },

    async version ({ res }) {
      sendJson(res, 200, {
        Version: VERSION,
        Commit: '',
        Repo: '16',
        System: `${process.arch}/${process.platform}`,
        Golang: `node-${process.version}`
      })
    },

    async 'swarm/connect' ({ res, args, ctx }) {
      requiredArg(args, 'address')
      const strings = []
      for (const arg of args) {
        let addr
        try {
          addr = multiaddr(arg)
        } catch (err) {
          throw new RpcError(`invalid multiaddr "${arg}": ${err.message}`)
        }
        const peer = addr.getComponents().findLast((c) => c.name === 'p2p')?.value
        if (peer == null) throw new RpcError(`invalid peer address: ${arg}: no /p2p/ peer id`)
        const conn = await helia.libp2p.dial(addr, { signal: ctx.signal })
        strings.push(`connect ${conn.remotePeer.toString()} success`)
      }
      sendJson(res, 200, { Strings: strings })
    },

    async 'swarm/peers' ({ res }) {
      const peers = helia.libp2p.getConnections().map((conn) => ({
        Addr: conn.remoteAddr.toString().replace(/\/p2p\/[^/]+$/, ''),
        Peer: conn.remotePeer.toString(),
        Latency: '',
        Muxer: conn.multiplexer ?? '',
        Direction: conn.direction === 'inbound' ? 1 : 2,
        Streams: null
      }))
      sendJson(res, 200, { Peers: peers })
    }
  }

  /** Run one request; `path` is the part after /api/v0/. */
  return async function handle (path, req, res) {
    const command = commands[path]
    if (command == null) {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' })
      return res.end('404 page not found\n')
    }
    if (req.method !== 'POST') {
      return sendError(res, new RpcError(`${req.method} method not allowed; use POST`, { status: 405, code: CODE_CLIENT }))
    }
    const url = new URL(req.url, 'http://devnode')
    const query = url.searchParams
    // Abort the command when the caller hangs up or Kubo's global `timeout` option elapses.
    const hangup = new AbortController()
    res.on('close', () => { if (!res.writableFinished) hangup.abort() })
    const ctx = { signal: hangup.signal, timeoutSignal: null, offline: false, cid: null }
    try {
      const timeout = query.get('timeout')
      if (timeout != null && timeout !== '') {
        ctx.timeoutSignal = AbortSignal.timeout(parseDuration(timeout))
        ctx.signal = AbortSignal.any([hangup.signal, ctx.timeoutSignal])
      }
      ctx.offline = flag(query, 'offline', false)
      if (path !== 'add') req.resume()
      await command({ req, res, query, args: query.getAll('arg'), ctx })
    } catch (err) {
      if (!res.destroyed) sendError(res, kuboError(err, ctx))
    }
  }
}
