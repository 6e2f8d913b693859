/*
 * nicgen: a NIC-like packet source for bench/dpdk-vs-ovs.sh.
 *
 *   nicgen EAL-ARGS --vdev net_memif0,role=server,socket=PATH,socket-abstract=no \
 *          -- PCAP [BURST]
 *
 * Reads the frames of PCAP (one per flow, as `fulmar bench --export`
 * writes them) into one compact table (the frame bytes back to back, 64
 * bytes a slot for 64-byte frames: 4 MiB for 65,536 flows) and sends them
 * round-robin, as fast as the other side takes them, on the only ethdev the
 * EAL arguments create: a memif server, whose client is the switch under
 * test (or testpmd). Each burst takes BURST (default 32) mbufs from a small
 * pool of its own, copies the next frames of the table into them and hands
 * them to the memif, which copies them into its shared ring (1,024 slots
 * of 2 KiB) and frees them; the pool's per-lcore cache hands the same
 * mbufs back at once. So the switch reads from a small set of recycled
 * buffers, as it would from a NIC's descriptor ring, whatever the number
 * of flows, and the flows' bytes live in the generator's memory, not in
 * the switch's.
 *
 * Anything received on the port is freed (its queues are drained every 256
 * bursts). SIGINT or SIGTERM stops it; it
 * then prints "nicgen: sent N" on stderr. It needs a core of its own to
 * keep ahead of the switch (the script gives it CPU 0, beside the control
 * threads, and the switch CPU 1).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#define MAX_BURST 256
#define RX_QUEUES 16

static volatile sig_atomic_t quit;

static void on_signal(int sig)
{
	(void)sig;
	quit = 1;
}

/* The frames: n slots of `slot` bytes each, lengths apart. */
struct table {
	uint8_t *bytes;
	uint16_t *len;
	uint32_t n;
	uint32_t slot;
};

static uint32_t rd32(const uint8_t *p, int swap)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return swap ? __builtin_bswap32(v) : v;
}

/* Loads a classic pcap file (either byte order, micro- or nanosecond
 * stamps); exits with a message on any error. */
static void load_pcap(const char *path, struct table *t)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL)
		rte_exit(EXIT_FAILURE, "nicgen: %s: %s\n", path, strerror(errno));
	uint8_t gh[24], rh[16];
	if (fread(gh, 1, 24, f) != 24)
		rte_exit(EXIT_FAILURE, "nicgen: %s: no pcap header\n", path);
	uint32_t magic;
	memcpy(&magic, gh, 4);
	int swap;
	if (magic == 0xa1b2c3d4 || magic == 0xa1b23c4d)
		swap = 0;
	else if (magic == 0xd4c3b2a1 || magic == 0x4d3cb2a1)
		swap = 1;
	else
		rte_exit(EXIT_FAILURE, "nicgen: %s: not a pcap file\n", path);
	/* First pass: count the frames and find the longest. */
	uint32_t n = 0, longest = 0;
	long start = ftell(f);
	while (fread(rh, 1, 16, f) == 16) {
		uint32_t caplen = rd32(rh + 8, swap);
		if (caplen < 14 || caplen > 9000)
			rte_exit(EXIT_FAILURE, "nicgen: %s: frame %u has %u bytes\n", path, n, caplen);
		if (fseek(f, caplen, SEEK_CUR) != 0)
			rte_exit(EXIT_FAILURE, "nicgen: %s: truncated\n", path);
		if (caplen > longest)
			longest = caplen;
		n++;
	}
	if (n == 0)
		rte_exit(EXIT_FAILURE, "nicgen: %s: no frames\n", path);
	t->n = n;
	t->slot = (longest + 63) & ~63u;
	t->bytes = aligned_alloc(64, (size_t)n * t->slot);
	t->len = calloc(n, sizeof(*t->len));
	if (t->bytes == NULL || t->len == NULL)
		rte_exit(EXIT_FAILURE, "nicgen: no memory for %u frames\n", n);
	fseek(f, start, SEEK_SET);
	for (uint32_t i = 0; i < n; i++) {
		if (fread(rh, 1, 16, f) != 16)
			rte_exit(EXIT_FAILURE, "nicgen: %s: changed while read\n", path);
		uint32_t caplen = rd32(rh + 8, swap);
		if (caplen > t->slot || fread(t->bytes + (size_t)i * t->slot, 1, caplen, f) != caplen)
			rte_exit(EXIT_FAILURE, "nicgen: %s: changed while read\n", path);
		t->len[i] = (uint16_t)caplen;
	}
	fclose(f);
}

int main(int argc, char **argv)
{
	int r = rte_eal_init(argc, argv);
	if (r < 0)
		rte_exit(EXIT_FAILURE, "nicgen: EAL: %s\n", rte_strerror(rte_errno));
	argc -= r;
	argv += r;
	if (argc < 2 || argc > 3)
		rte_exit(EXIT_FAILURE, "usage: nicgen EAL-ARGS -- PCAP [BURST]\n");
	unsigned burst = argc == 3 ? (unsigned)atoi(argv[2]) : 32;
	if (burst == 0 || burst > MAX_BURST)
		rte_exit(EXIT_FAILURE, "nicgen: burst must be 1..%d\n", MAX_BURST);
	struct table t;
	load_pcap(argv[1], &t);
	if (rte_eth_dev_count_avail() != 1)
		rte_exit(EXIT_FAILURE, "nicgen: wants exactly one ethdev (a memif server), has %u\n",
			 rte_eth_dev_count_avail());
	uint16_t port = 0;
	RTE_ETH_FOREACH_DEV(port) break;

	struct rte_mempool *pool = rte_pktmbuf_pool_create("nicgen", 4095, 256, 0,
		RTE_MBUF_DEFAULT_BUF_SIZE, (int)rte_socket_id());
	if (pool == NULL)
		rte_exit(EXIT_FAILURE, "nicgen: mbuf pool: %s\n", rte_strerror(rte_errno));
	/* The client (the switch) decides how many rings it uses each way and
	 * the server refuses a ring index it has no queue for: OVS asks for a
	 * transmit queue per PMD thread plus one, which are receive queues
	 * here, so there are RX_QUEUES of them (only their rings are shared;
	 * the switch sends nothing back on this port). */
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	if ((r = rte_eth_dev_configure(port, RX_QUEUES, 1, &conf)) != 0)
		rte_exit(EXIT_FAILURE, "nicgen: port setup: %s\n", rte_strerror(-r));
	for (uint16_t q = 0; q < RX_QUEUES; q++)
		if ((r = rte_eth_rx_queue_setup(port, q, 1024, rte_eth_dev_socket_id(port), NULL, pool)) != 0)
			rte_exit(EXIT_FAILURE, "nicgen: RX queue %u: %s\n", q, rte_strerror(-r));
	if ((r = rte_eth_tx_queue_setup(port, 0, 1024, rte_eth_dev_socket_id(port), NULL)) != 0
	    || (r = rte_eth_dev_start(port)) != 0)
		rte_exit(EXIT_FAILURE, "nicgen: port setup: %s\n", rte_strerror(-r));
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	fprintf(stderr, "nicgen: %u frames of up to %u bytes, burst %u\n", t.n, t.slot, burst);

	struct rte_mbuf *m[MAX_BURST], *junk[MAX_BURST];
	uint64_t sent = 0;
	uint32_t next = 0, rounds = 0;
	while (!quit) {
		/* Now and then (nothing is expected): drain what came back. */
		if ((++rounds & 255) == 0)
			for (uint16_t q = 0; q < RX_QUEUES; q++) {
				uint16_t got = rte_eth_rx_burst(port, q, junk, MAX_BURST);
				if (got)
					rte_pktmbuf_free_bulk(junk, got);
			}
		if (rte_pktmbuf_alloc_bulk(pool, m, burst) != 0)
			continue;
		for (unsigned i = 0; i < burst; i++) {
			uint16_t len = t.len[next];
			rte_memcpy(rte_pktmbuf_mtod(m[i], void *), t.bytes + (size_t)next * t.slot, len);
			m[i]->data_len = len;
			m[i]->pkt_len = len;
			next = next + 1 == t.n ? 0 : next + 1;
		}
		/* A full ring (or no client yet): try again, keeping the flows in
		 * order, until the client takes them. */
		unsigned done = 0;
		while (done < burst && !quit)
			done += rte_eth_tx_burst(port, 0, m + done, (uint16_t)(burst - done));
		if (done < burst)
			rte_pktmbuf_free_bulk(m + done, burst - done);
		sent += done;
	}
	fprintf(stderr, "nicgen: sent %lu\n", (unsigned long)sent);
	rte_eth_dev_stop(port);
	rte_eth_dev_close(port);
	rte_eal_cleanup();
	return 0;
}
