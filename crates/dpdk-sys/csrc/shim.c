/* See shim.h. Compiled with the flags `pkg-config --cflags libdpdk` gives
 * (which force-include rte_config.h). */
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

#include "shim.h"

uint16_t fulmar_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_rx_burst(port, queue, pkts, n);
}

uint16_t fulmar_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_tx_burst(port, queue, pkts, n);
}

struct rte_mbuf *fulmar_pktmbuf_alloc(struct rte_mempool *mp)
{
	return rte_pktmbuf_alloc(mp);
}

int fulmar_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned n)
{
	return rte_pktmbuf_alloc_bulk(mp, mbufs, n);
}

void fulmar_pktmbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

int fulmar_errno(void)
{
	return rte_errno;
}

unsigned fulmar_lcore_id(void)
{
	return rte_lcore_id();
}

uint64_t fulmar_rss_hf_ip_tcp_udp(void)
{
	return RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP;
}

unsigned fulmar_mbuf_struct_size(void)
{
	return sizeof(struct rte_mbuf);
}

unsigned fulmar_pktmbuf_headroom(void)
{
	return RTE_PKTMBUF_HEADROOM;
}
