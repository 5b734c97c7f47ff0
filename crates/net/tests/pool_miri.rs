//! The packet pool's ownership hand-off, as the server does it, small enough for
//! Miri: a dispatcher receives requests into the buffers of free tokens (through
//! raw pointers to several packets at once, as `UdpDatapath::recv_batch` does),
//! parses them and pushes the tokens' indices through one job ring per worker;
//! each worker takes its job's token back off the ring, reads its request and
//! rewrites the same buffer into the response in place, then hands the token
//! back through its completion ring; the dispatcher reads the response and
//! reuses the buffer for a later request.
//!
//! Natively this is a stress test of the same hand-off. Under Miri
//! (`cargo +nightly miri test -p psp-net --test pool_miri`, docs/verification.md)
//! it checks that no buffer is touched by two threads without the rings'
//! release/acquire between them (Miri's data-race detector) and that the
//! pool's `&mut` borrows never alias (Stacked Borrows).

use std::net::SocketAddr;
use std::sync::Arc;

use psp_net::datapath::PeerAddr;
use psp_net::pool::{PACKET_BYTES, Packet, PacketPool, PacketToken};
use psp_net::protocol::{self, HEADER_LEN, Status};

/// Fewer buffers than requests in flight could use, so tokens are reused.
const POOL: u32 = 6;
const WORKERS: usize = 2;
/// Datagrams received per batch, at most.
const BATCH: usize = 3;
const REQUESTS: u64 = if cfg!(miri) { 24 } else { 50_000 };

/// A job as the job ring carries it: the token's index and the body's length.
#[derive(Clone, Copy)]
struct Job {
    token: u32,
    len: u16,
}

/// The request body of request `id`.
fn body_of(id: u64) -> Vec<u8> {
    (0..(id % 40) as u8)
        .map(|b| b.wrapping_mul(7) ^ id as u8)
        .collect()
}

/// The address request `id` came from.
fn peer_of(id: u64) -> SocketAddr {
    SocketAddr::from(([10, 0, (id >> 8) as u8, id as u8], 7000 + (id % 100) as u16))
}

/// Fills the packets of `tokens` with the next requests, as `recv_batch` does:
/// raw pointers to all the packets first, then writes through them, then the
/// lengths through `get_mut`.
fn receive(pool: &PacketPool, tokens: &mut [PacketToken], first_id: u64) {
    let ptrs: Vec<(*mut u8, *mut PeerAddr)> = tokens
        .iter_mut()
        .map(|t| {
            let p: *mut Packet = pool.as_ptr(t);
            // SAFETY: `p` points to a live packet of the pool; taking field
            // addresses creates no reference.
            unsafe { (Packet::own_buffer(p), &raw mut (*p).peer) }
        })
        .collect();
    let mut lens = Vec::with_capacity(tokens.len());
    for (i, &(data, peer)) in ptrs.iter().enumerate() {
        let id = first_id + i as u64;
        let mut dgram = Vec::new();
        protocol::encode_request(&mut dgram, (id % 3) as u16, id, &body_of(id));
        assert!(dgram.len() <= PACKET_BYTES);
        // SAFETY: the caller holds the token, so nothing else accesses its
        // packet; `data` holds PACKET_BYTES and `peer` is a PeerAddr.
        unsafe {
            std::ptr::copy_nonoverlapping(dgram.as_ptr(), data, dgram.len());
            peer.write(PeerAddr::from(peer_of(id)));
        }
        lens.push(dgram.len());
    }
    // The raw pointers above are no longer used.
    for (t, len) in tokens.iter_mut().zip(lens) {
        pool.get_mut(t).len = len;
    }
}

/// A worker's loop: serve each job in its buffer, hand the token back.
fn worker(pool: &PacketPool, mut jobs: rtrb::Consumer<Job>, mut done: rtrb::Producer<u32>) -> u64 {
    let mut served = 0;
    loop {
        let Ok(job) = jobs.pop() else {
            if jobs.is_abandoned() && jobs.is_empty() {
                return served;
            }
            std::thread::yield_now();
            continue;
        };
        // SAFETY: the job ring handed the slot to this worker; it hands it
        // back by the completion ring's push below, consuming the token.
        let mut token = unsafe { PacketToken::from_raw(job.token) };
        let pkt = pool.get_mut(&mut token);
        let h = protocol::parse_request(pkt.bytes()).expect("a request");
        let id = h.id;
        assert_eq!(pkt.peer.to_socket_addr(), Some(peer_of(id)));
        let body = &mut pkt.data_mut()[HEADER_LEN..HEADER_LEN + usize::from(job.len)];
        assert_eq!(body, &body_of(id)[..], "request {id} arrived corrupted");
        // The response, in place and as long as the request: the body reversed
        // under a response header.
        body.reverse();
        let (header, _) = pkt
            .data_mut()
            .split_first_chunk_mut::<HEADER_LEN>()
            .expect("packet buffers hold a header");
        protocol::make_response_header(header, Status::Ok, job.len);
        served += 1;
        let index = token.into_raw();
        while done.push(index).is_err() {
            std::thread::yield_now();
        }
    }
}

#[test]
fn tokens_hand_packet_buffers_between_dispatcher_and_workers() {
    let pool = Arc::new(PacketPool::new(POOL as usize));
    let mut job_txs = Vec::new();
    let mut done_rxs = Vec::new();
    let mut handles = Vec::new();
    for _ in 0..WORKERS {
        // Each ring holds every token: a push never finds it full.
        let (job_tx, job_rx) = rtrb::RingBuffer::<Job>::new(POOL as usize);
        let (done_tx, done_rx) = rtrb::RingBuffer::<u32>::new(POOL as usize);
        job_txs.push(job_tx);
        done_rxs.push(done_rx);
        let pool = pool.clone();
        handles.push(std::thread::spawn(move || worker(&pool, job_rx, done_tx)));
    }

    // SAFETY: the pool is new and unshared: this thread owns every slot,
    // and makes each slot's token once.
    let mut free: Vec<PacketToken> = (0..POOL)
        .map(|t| unsafe { PacketToken::from_raw(t) })
        .collect();
    let (mut received, mut completed) = (0u64, 0u64);
    while completed < REQUESTS {
        let mut worked = false;
        for done in &mut done_rxs {
            while let Ok(index) = done.pop() {
                // SAFETY: the completion ring handed the slot back to the
                // dispatcher; the worker consumed its token before the push.
                let mut token = unsafe { PacketToken::from_raw(index) };
                let pkt = pool.get_mut(&mut token);
                let (h, status) = protocol::parse_response(pkt.bytes()).expect("a response");
                assert_eq!(status, Status::Ok);
                let mut want = body_of(h.id);
                want.reverse();
                assert_eq!(
                    &pkt.bytes()[HEADER_LEN..],
                    &want[..],
                    "response {} corrupted",
                    h.id
                );
                free.push(token);
                completed += 1;
                worked = true;
            }
        }
        let n = free.len().min(BATCH).min((REQUESTS - received) as usize);
        if n > 0 {
            let mut tokens = free.split_off(free.len() - n);
            receive(&pool, &mut tokens, received);
            for mut token in tokens {
                let pkt = pool.get_mut(&mut token);
                let h = protocol::parse_request(pkt.bytes()).expect("a request");
                assert_eq!(h.id, received);
                let len = (pkt.len - HEADER_LEN) as u16;
                let job = Job {
                    token: token.into_raw(),
                    len,
                };
                let w = (received % WORKERS as u64) as usize;
                assert!(job_txs[w].push(job).is_ok(), "a ring holds every token");
                received += 1;
            }
            worked = true;
        }
        if !worked {
            std::thread::yield_now();
        }
    }
    drop(job_txs);
    let served: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(served, REQUESTS);
    assert_eq!(free.len(), POOL as usize);
}
