// Build the Helia node behind the dev node: filesystem blockstore and datastore in the repo
// folder, libp2p on loopback TCP only, bitswap as the only block broker.
//
// createHeliaLight + withLibp2pLight + withBitswap instead of createHelia: the latter adds a
// delegated HTTP router, public trustless gateways, mDNS and bootstrap peers, all of which
// reach for the internet (see DESIGN.md, toolchain facts).

import path from 'node:path'
import { noise } from '@chainsafe/libp2p-noise'
import { yamux } from '@chainsafe/libp2p-yamux'
import { withBitswap } from '@helia/bitswap'
import { withLibp2pLight } from '@helia/libp2p'
import { identify } from '@libp2p/identify'
import { tcp } from '@libp2p/tcp'
import { FsBlockstore } from 'blockstore-fs'
import { FsDatastore } from 'datastore-fs'
import { createHeliaLight } from 'helia'

/**
 * Create and start a Helia node whose blocks, pins and libp2p key live under `repo`.
 * The peer id survives restarts because withLibp2pLight loads (or creates once) the node's
 * private key from the datastore.
 */
export async function startHelia ({ repo, swarmPort }) {
  const blockstore = new FsBlockstore(path.join(repo, 'blocks'))
  const datastore = new FsDatastore(path.join(repo, 'datastore'))
  await blockstore.open()
  await datastore.open()

  const light = createHeliaLight({ blockstore, datastore })
  const helia = withBitswap(withLibp2pLight(light, {
    addresses: { listen: [`/ip4/127.0.0.1/tcp/${swarmPort}`] },
    transports: [tcp()],
    connectionEncrypters: [noise()],
    streamMuxers: [yamux()],
    peerDiscovery: [],
    services: { identify: identify() }
  }))
  await helia.start()
  return helia
}
