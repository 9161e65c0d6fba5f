#!/usr/bin/env node
// truetrain IPFS dev node: Helia behind the Kubo RPC subset truetrain uses (see rpc.mjs).
//
//   node scripts/ipfs-devnode/devnode.mjs --repo DIR --api-port 5001 [--swarm-port 0]
//
// Listens on 127.0.0.1 only. Prints one ready line on stdout once the API answers:
//   devnode ready api=http://127.0.0.1:5001 peer=12D3Koo... swarm=/ip4/127.0.0.1/tcp/N/p2p/... pid=N
// Exit codes: 0 clean stop, 1 unexpected failure, 2 bad flags, 3 port in use, 4 repo in use.

import fs from 'node:fs'
import http from 'node:http'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { unixfs } from '@helia/unixfs'
import { startHelia } from './node.mjs'
import { createRpc, RpcError, sendError } from './rpc.mjs'

const HOST = '127.0.0.1'
const EXIT = { failure: 1, usage: 2, portInUse: 3, repoInUse: 4 }

function die (code, message) {
  process.stderr.write(`devnode: ${message}\n`)
  process.exit(code)
}

function parseFlags () {
  let values
  try {
    ({ values } = parseArgs({
      options: {
        repo: { type: 'string' },
        'api-port': { type: 'string', default: '5001' },
        'swarm-port': { type: 'string', default: '0' }
      }
    }))
  } catch (err) {
    die(EXIT.usage, err.message)
  }
  if (values.repo == null || values.repo === '') die(EXIT.usage, '--repo DIR is required')
  const port = (name) => {
    const text = values[name]
    const n = Number(text)
    if (!/^\d+$/.test(text) || n > 65535) die(EXIT.usage, `--${name} must be a port number 0-65535, got "${text}"`)
    return n
  }
  return { repo: path.resolve(values.repo), apiPort: port('api-port'), swarmPort: port('swarm-port') }
}

/** True if `pid` is a running dev node (a recycled pid of some other program is not). */
function isDevnode (pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('devnode.mjs')
  } catch (err) {
    if (err.code === 'ENOENT') return false
    try { // no /proc (not Linux): fall back to "some process has that pid"
      process.kill(pid, 0)
      return true
    } catch (killErr) {
      return killErr.code === 'EPERM'
    }
  }
}

/** Take the repo lock (a pid file, like Kubo's repo.lock); a stale lock is taken over. */
function lockRepo (repo) {
  const lockPath = path.join(repo, 'devnode.lock')
  try {
    const holder = Number(fs.readFileSync(lockPath, 'utf8').trim())
    if (holder > 0 && holder !== process.pid && isDevnode(holder)) {
      die(EXIT.repoInUse, `repo ${repo} is in use by another dev node (pid ${holder})`)
    }
  } catch (err) {
    if (err.code !== 'ENOENT') throw err
  }
  fs.writeFileSync(lockPath, `${process.pid}\n`)
  return () => {
    try {
      if (fs.readFileSync(lockPath, 'utf8').trim() === String(process.pid)) fs.unlinkSync(lockPath)
    } catch { /* already gone */ }
  }
}

function listen (server, port) {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, HOST, () => {
      server.off('error', reject)
      resolve(server.address().port)
    })
  })
}

async function main () {
  const { repo, apiPort, swarmPort } = parseFlags()
  fs.mkdirSync(repo, { recursive: true })
  const unlock = lockRepo(repo)

  // The API port is bound first so a taken port fails in milliseconds, before Helia starts;
  // until Helia is up every command answers 503.
  let handle = null
  const server = http.createServer((req, res) => {
    const url = req.url ?? '/'
    if (!url.startsWith('/api/v0/')) {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' })
      return res.end('404 page not found\n')
    }
    if (handle == null) {
      req.resume()
      return sendError(res, new RpcError('dev node is starting', { status: 503 }))
    }
    handle(url.slice('/api/v0/'.length).split('?')[0], req, res).catch((err) => {
      process.stderr.write(`devnode: request failed: ${err.stack ?? err}\n`)
      if (!res.headersSent) sendError(res, new RpcError(String(err?.message ?? err)))
      else res.destroy()
    })
  })
  server.keepAliveTimeout = 30_000
  let port
  try {
    port = await listen(server, apiPort)
  } catch (err) {
    unlock()
    if (err.code === 'EADDRINUSE') die(EXIT.portInUse, `API port ${apiPort} on ${HOST} is already in use`)
    throw err
  }

  let helia
  try {
    helia = await startHelia({ repo, swarmPort })
  } catch (err) {
    server.close()
    unlock()
    if (err.code === 'EADDRINUSE' || /EADDRINUSE|address already in use/i.test(String(err.message))) {
      die(EXIT.portInUse, `swarm port ${swarmPort} on ${HOST} is already in use`)
    }
    throw err
  }
  handle = createRpc({ helia, fs: unixfs(helia) })

  const apiAddr = `/ip4/${HOST}/tcp/${port}`
  fs.writeFileSync(path.join(repo, 'api'), apiAddr) // Kubo writes $IPFS_PATH/api the same way
  const swarm = helia.libp2p.getMultiaddrs().map((ma) => ma.toString())
  process.stdout.write(`devnode ready api=http://${HOST}:${port} peer=${helia.libp2p.peerId} ` +
    `swarm=${swarm[0] ?? ''} pid=${process.pid}\n`)

  let stopping = false
  const stop = async (signal) => {
    if (stopping) return
    stopping = true
    process.stderr.write(`devnode: ${signal}, stopping\n`)
    // A stuck libp2p shutdown must not keep the process (and the port) alive forever.
    setTimeout(() => process.exit(EXIT.failure), 5000).unref()
    server.close()
    server.closeAllConnections()
    try {
      await helia.stop()
    } finally {
      try { fs.unlinkSync(path.join(repo, 'api')) } catch { /* already gone */ }
      unlock()
    }
    process.exit(0)
  }
  process.on('SIGTERM', () => { stop('SIGTERM') })
  process.on('SIGINT', () => { stop('SIGINT') })
}

process.on('unhandledRejection', (err) => {
  process.stderr.write(`devnode: unhandled rejection: ${err?.stack ?? err}\n`)
})

main().catch((err) => die(EXIT.failure, err?.stack ?? String(err)))
