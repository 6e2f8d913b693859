/* fulmar's C shim over DPDK: the functions DPDK defines static inline in its
 * headers (and so exports no symbol for), each wrapped as a plain function,
 * plus the few macros Rust cannot evaluate. Every function does nothing
 * beyond the call it wraps. */
#ifndef FULMAR_DPDK_SHIM_H
#define FULMAR_DPDK_SHIM_H

#include <stdint.h>

struct rte_mbuf;
struct rte_mempool;

/* rte_eth_rx_burst / rte_eth_tx_burst. */
uint16_t fulmar_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
uint16_t fulmar_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);

/* rte_pktmbuf_alloc / rte_pktmbuf_alloc_bulk / rte_pktmbuf_free. */
struct rte_mbuf *fulmar_pktmbuf_alloc(struct rte_mempool *mp);
int fulmar_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned n);
void fulmar_pktmbuf_free(struct rte_mbuf *m);

/* The calling thread's rte_errno, and its lcore id (UINT32_MAX: not an lcore). */
int fulmar_errno(void);
unsigned fulmar_lcore_id(void);

/* RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP (function-like macros). */
uint64_t fulmar_rss_hf_ip_tcp_udp(void);

/* The size of struct rte_mbuf and RTE_PKTMBUF_HEADROOM, to check the bindings. */
unsigned fulmar_mbuf_struct_size(void);
unsigned fulmar_pktmbuf_headroom(void);

#endif
