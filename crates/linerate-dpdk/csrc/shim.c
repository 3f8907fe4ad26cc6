/*
 * linerate's DPDK shim: DPDK's burst and mbuf functions are static inline
 * in its headers, so Rust calls them through these few real functions,
 * each working on a whole burst (one call per batch, not per frame).
 * Errors are negative errno values.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>

static char runtime_dir[4096];

/* An empty runtime directory is not left behind (rmdir fails harmlessly
 * when something is still in it). */
static void remove_runtime_dir(void)
{
	if (runtime_dir[0] != '\0')
		rmdir(runtime_dir);
}

int lr_eal_init(int argc, char **argv)
{
	int r = rte_eal_init(argc, argv);
	int e = rte_errno;
	/* (made early in the set-up: also when it fails later) */
	snprintf(runtime_dir, sizeof(runtime_dir), "%s", rte_eal_get_runtime_dir());
	/* now (empty with --no-shconf: a process killed later leaves
	 * nothing) and at exit */
	remove_runtime_dir();
	atexit(remove_runtime_dir);
	return r < 0 ? -e : r;
}

const char *lr_strerror(int e)
{
	return rte_strerror(e);
}

int lr_port_by_name(const char *name, uint16_t *port)
{
	return rte_eth_dev_get_port_by_name(name, port);
}

int lr_port_valid(uint16_t port)
{
	return rte_eth_dev_is_valid_port(port);
}

int lr_port_name(uint16_t port, char *name, size_t len)
{
	char buf[RTE_ETH_NAME_MAX_LEN];
	int r = rte_eth_dev_get_name_by_port(port, buf);
	if (r == 0)
		snprintf(name, len, "%s", buf);
	return r;
}

int lr_port_mac(uint16_t port, uint8_t *mac)
{
	struct rte_ether_addr a;
	int r = rte_eth_macaddr_get(port, &a);
	if (r == 0)
		memcpy(mac, a.addr_bytes, 6);
	return r;
}

int lr_port_mtu(uint16_t port, uint16_t *mtu)
{
	return rte_eth_dev_get_mtu(port, mtu);
}

/* 1: up, 0: down, < 0: error */
int lr_port_link(uint16_t port)
{
	struct rte_eth_link l;
	int r = rte_eth_link_get_nowait(port, &l);
	return r < 0 ? r : l.link_status;
}

/* The queues the port takes at most (the smaller of RX and TX), its
 * driver's name and its NUMA socket. */
int lr_port_info(uint16_t port, uint16_t *max_queues, char *driver, size_t len, int *socket)
{
	struct rte_eth_dev_info info;
	int r = rte_eth_dev_info_get(port, &info);
	if (r != 0)
		return r;
	*max_queues = info.max_rx_queues < info.max_tx_queues ? info.max_rx_queues : info.max_tx_queues;
	snprintf(driver, len, "%s", info.driver_name ? info.driver_name : "");
	*socket = rte_eth_dev_socket_id(port);
	if (*socket < 0)
		*socket = 0;
	return 0;
}

/* mbufs each lcore keeps of a pool (testpmd's default is 250): an
 * lcore takes and gives back mbufs there, the pool's ring (atomic
 * operations shared between threads) touched once per half cache. */
#define LR_POOL_CACHE 256

/* linerate's workers are threads of its own, not the EAL's: the first
 * burst a thread moves registers it as an lcore (rte_thread_register),
 * so that the pools' per-lcore caches serve it, and so do the PMDs'
 * frees (net_null and net_af_packet give the mbufs they sent back on the
 * sending thread). When the thread ends, what its caches hold goes back
 * to the pools and its lcore id is released (a pthread key's destructor),
 * so that threads that come and go (rfc2544's trials) neither strand
 * mbufs nor use up the lcore ids. A thread the EAL made, or one that
 * finds no lcore id left, works without a cache, as before. */
static pthread_key_t lcore_key;
static pthread_once_t lcore_key_once = PTHREAD_ONCE_INIT;
static __thread int lcore_tried;

static void flush_cache(struct rte_mempool *mp, void *arg)
{
	unsigned lcore = *(unsigned *)arg;
	struct rte_mempool_cache *c = rte_mempool_default_cache(mp, lcore);
	if (c != NULL)
		rte_mempool_cache_flush(c, mp);
}

static void lcore_release(void *v)
{
	unsigned lcore = rte_lcore_id();
	(void)v;
	if (lcore == LCORE_ID_ANY)
		return;
	rte_mempool_walk(flush_cache, &lcore);
	rte_thread_unregister();
}

static void lcore_key_make(void)
{
	(void)pthread_key_create(&lcore_key, lcore_release);
}

static inline void lcore_enter(void)
{
	if (likely(lcore_tried))
		return;
	lcore_tried = 1;
	if (rte_lcore_id() != LCORE_ID_ANY)
		return;
	if (rte_thread_register() != 0)
		return;
	(void)pthread_once(&lcore_key_once, lcore_key_make);
	(void)pthread_setspecific(lcore_key, (void *)1);
}

/* The lcore id this thread moves bursts as (registering it first), or -1
 * where it has none (no cache). */
int lr_thread_lcore(void)
{
	lcore_enter();
	return rte_lcore_id() == LCORE_ID_ANY ? -1 : (int)rte_lcore_id();
}

/* An mbuf pool whose every mbuf carries its index (0..n) in a 4-byte
 * private area: the slot a frame builder remembers it by. */
static void set_index(struct rte_mempool *mp, void *arg, void *obj, unsigned idx)
{
	(void)mp;
	(void)arg;
	*(uint32_t *)rte_mbuf_to_priv((struct rte_mbuf *)obj) = idx;
}

/* An mbuf pool whose objects are packed end to end, as DPDK 22.11's
 * net_af_xdp assumes when it registers a pool as its UMEM (the pool's
 * object count times one object's size, from the first object on).
 * Without hugepages rte_pktmbuf_pool_create puts each object that does
 * not fit twice in a 4 KiB page on a page of its own: past about 60% of
 * the pool the UMEM ends, and the kernel drops every frame sent from the
 * rest as an invalid descriptor (tx_invalid_descs).
 *
 * Every pool is made so without hugepages, not only a UMEM: an object on
 * a page of its own starts at the same offset in every page, so every
 * mbuf's header falls in the same few sets of the L1 cache, and a burst
 * of 32 to 64 of them evicts itself (on net_null, io forwarding went
 * from 29-30 to 51-64 Mpps, txonly from 37-43 to 48-49). */
static struct rte_mempool *pool_packed(const char *name, unsigned n, uint16_t room, int socket)
{
	struct rte_pktmbuf_pool_private priv;
	struct rte_mempool *mp;
	unsigned elt = sizeof(struct rte_mbuf) + RTE_MBUF_PRIV_ALIGN + room;
	int e;

	memset(&priv, 0, sizeof(priv));
	priv.mbuf_data_room_size = room;
	priv.mbuf_priv_size = RTE_MBUF_PRIV_ALIGN;
	mp = rte_mempool_create_empty(name, n, elt, LR_POOL_CACHE, sizeof(priv), socket, RTE_MEMPOOL_F_NO_IOVA_CONTIG);
	if (mp == NULL)
		return NULL;
	e = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL);
	if (e == 0) {
		rte_pktmbuf_pool_init(mp, &priv);
		e = rte_mempool_populate_default(mp);
	}
	if (e < 0) {
		rte_mempool_free(mp);
		rte_errno = -e;
		return NULL;
	}
	rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
	return mp;
}

struct rte_mempool *lr_pool_create(const char *name, unsigned n, uint16_t data_room, int socket, int *err)
{
	uint16_t room = data_room + RTE_PKTMBUF_HEADROOM;
	/* With hugepages DPDK packs the objects within each page already (a
	 * page's last few hundred bytes left over), and a UMEM used in
	 * zero-copy mode must not have frames cross pages that are not
	 * physically contiguous: the default layout then. */
	struct rte_mempool *mp = !rte_eal_has_hugepages()
				     ? pool_packed(name, n, room, socket)
				     : rte_pktmbuf_pool_create(name, n, LR_POOL_CACHE, RTE_MBUF_PRIV_ALIGN, room, socket);
	if (mp == NULL) {
		*err = -rte_errno;
		return NULL;
	}
	rte_mempool_obj_iter(mp, set_index, NULL);
	return mp;
}

/* Configures `nq` RX and TX queues (RSS over them where the port has it),
 * each RX queue filling from rx_pools[q], and starts the port in
 * promiscuous mode. */
int lr_port_start(uint16_t port, uint16_t nq, uint16_t nb_desc, struct rte_mempool **rx_pools)
{
	struct rte_eth_dev_info info;
	struct rte_eth_conf conf;
	uint16_t nb_rxd = nb_desc, nb_txd = nb_desc;
	int socket = rte_eth_dev_socket_id(port);
	int r;

	if (socket < 0)
		socket = 0;
	r = rte_eth_dev_info_get(port, &info);
	if (r != 0)
		return r;
	memset(&conf, 0, sizeof(conf));
	if (nq > 1 && info.flow_type_rss_offloads != 0) {
		conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
		conf.rx_adv_conf.rss_conf.rss_hf =
		    (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_TCP) & info.flow_type_rss_offloads;
	}
	r = rte_eth_dev_configure(port, nq, nq, &conf);
	if (r != 0)
		return r;
	r = rte_eth_dev_adjust_nb_rx_tx_desc(port, &nb_rxd, &nb_txd);
	if (r != 0)
		return r;
	for (uint16_t q = 0; q < nq; q++) {
		r = rte_eth_rx_queue_setup(port, q, nb_rxd, socket, NULL, rx_pools[q]);
		if (r != 0)
			return r;
		r = rte_eth_tx_queue_setup(port, q, nb_txd, socket, NULL);
		if (r != 0)
			return r;
	}
	r = rte_eth_dev_start(port);
	if (r != 0)
		return r;
	(void)rte_eth_promiscuous_enable(port);
	return 0;
}

/* Set in an mbuf's slot word when a frame was received into it: a frame
 * builder that gets it from a pool shared with an RX queue (net_af_xdp's
 * UMEM) must not trust what it last built there. */
#define LR_RECEIVED 0x80000000u

/* The rte_mbuf fields linerate's frame builder writes itself, one pass
 * over a burst (ffi.rs's MBUF_* constants): the build fails here, not at
 * run time, on a DPDK whose layout differs. */
_Static_assert(offsetof(struct rte_mbuf, buf_addr) == 0, "rte_mbuf.buf_addr moved");
_Static_assert(offsetof(struct rte_mbuf, data_off) == 16, "rte_mbuf.data_off moved");
_Static_assert(offsetof(struct rte_mbuf, pkt_len) == 36, "rte_mbuf.pkt_len moved");
_Static_assert(offsetof(struct rte_mbuf, data_len) == 40, "rte_mbuf.data_len moved");
_Static_assert(sizeof(struct rte_mbuf) == 128, "rte_mbuf's size changed (its private area follows)");
_Static_assert(RTE_PKTMBUF_HEADROOM == 128, "RTE_PKTMBUF_HEADROOM changed");

/* `n` mbufs, all or none (-ENOENT), and the bytes a frame may take in
 * each. Nothing else is touched here: the frame builder sets each one's
 * data offset and lengths as it builds (TxBurst in ffi/queue.rs), one
 * pass over the burst, as testpmd's txonly does.
 *
 * `shared`: the pool is an RX queue's too (net_af_xdp's UMEM), whose
 * receive path sets an mbuf's fields as it likes: each is reset whole.
 * Otherwise the pool is this TX queue's alone, and an mbuf comes back as
 * the PMD freed it (one segment, no next, reference 1: what
 * rte_pktmbuf_free leaves) with the offsets and flags set by the
 * builder (none), not rte_pktmbuf_reset's dozen stores a frame. */
int lr_alloc(struct rte_mempool *mp, struct rte_mbuf **m, unsigned n, uint16_t *room, int shared)
{
	lcore_enter();
	if (shared) {
		if (rte_pktmbuf_alloc_bulk(mp, m, n) != 0)
			return -ENOENT;
	} else if (rte_mempool_get_bulk(mp, (void **)m, n) != 0) {
		return -ENOENT;
	}
	*room = n ? m[0]->buf_len - RTE_PKTMBUF_HEADROOM : 0;
	return 0;
}

uint16_t lr_tx(uint16_t port, uint16_t queue, struct rte_mbuf **m, uint16_t n)
{
	return rte_eth_tx_burst(port, queue, m, n);
}

/* Up to `n` received frames: their mbufs, data and lengths (the first
 * segment's: linerate sets up no scattered receive); with `mark`, each
 * mbuf's slot word gets LR_RECEIVED (its pool is shared with a TX queue). */
uint16_t lr_rx(uint16_t port, uint16_t queue, struct rte_mbuf **m, uint16_t n, const uint8_t **data, uint16_t *lens,
	      int mark)
{
	uint16_t got;
	lcore_enter();
	got = rte_eth_rx_burst(port, queue, m, n);
	for (uint16_t i = 0; i < got; i++) {
		data[i] = rte_pktmbuf_mtod(m[i], const uint8_t *);
		lens[i] = m[i]->data_len;
	}
	if (mark)
		for (uint16_t i = 0; i < got; i++)
			*(uint32_t *)rte_mbuf_to_priv(m[i]) |= LR_RECEIVED;
	return got;
}

/* The OR of `n` frames' lengths (four at a time: one load of each mbuf's
 * address and its length, one OR, the loop's step shared). */
static inline uint32_t lengths_or(struct rte_mbuf *const *m, int n)
{
	uint32_t a = 0, b = 0;
	int i = 0;
	for (; i + 4 <= n; i += 4) {
		a |= m[i]->pkt_len | m[i + 1]->pkt_len;
		b |= m[i + 2]->pkt_len | m[i + 3]->pkt_len;
	}
	for (; i < n; i++)
		a |= m[i]->pkt_len;
	return a | b;
}

/* The longest of `n` frames. */
static inline uint32_t lengths_max(struct rte_mbuf *const *m, int n)
{
	uint32_t longest = 0;
	for (int i = 0; i < n; i++)
		longest = RTE_MAX(longest, m[i]->pkt_len);
	return longest;
}

/* Up to `n` received frames' mbufs alone, their data not read: those of
 * frames over `max` bytes freed and counted in `*over`, the others packed
 * at the front of `m`; returns how many were kept. With `mark` as lr_rx. */
uint16_t lr_rx_mbufs(uint16_t port, uint16_t queue, struct rte_mbuf **m, uint16_t n, int mark, uint16_t max,
		     uint16_t *over)
{
	uint16_t got, kept = 0;
	uint32_t longest;
	lcore_enter();
	got = rte_eth_rx_burst(port, queue, m, n);
	/* one branch-free look at every length first, their OR (no frame is
	 * longer than the OR of all, so an OR within `max` passes the burst
	 * whole: three instructions a frame where a maximum took seven); an
	 * OR over it (a long frame, or lengths whose bits add up past it)
	 * takes the exact maximum */
	longest = lengths_or(m, got);
	if (unlikely(longest > max))
		longest = lengths_max(m, got);
	if (mark)
		for (uint16_t i = 0; i < got; i++)
			*(uint32_t *)rte_mbuf_to_priv(m[i]) |= LR_RECEIVED;
	if (likely(longest <= max)) {
		*over = 0;
		return got;
	}
	for (uint16_t i = 0; i < got; i++) {
		struct rte_mbuf *b = m[i];
		if (b->pkt_len > max) {
			rte_pktmbuf_free(b);
			continue;
		}
		m[kept++] = b;
	}
	*over = got - kept;
	return kept;
}

/* mbufs of the pool that no one holds: in its ring and in its lcores'
 * caches. */
unsigned lr_pool_avail(struct rte_mempool *mp)
{
	return rte_mempool_avail_count(mp);
}

void lr_free(struct rte_mbuf **m, unsigned n)
{
	rte_pktmbuf_free_bulk(m, n);
}

/* The port's counters: frames it missed (no room in its RX ring), found
 * no mbuf for, received with errors; sent and failed to send. */
int lr_port_stats(uint16_t port, uint64_t *out)
{
	struct rte_eth_stats s;
	int r = rte_eth_stats_get(port, &s);
	if (r != 0)
		return r;
	out[0] = s.imissed;
	out[1] = s.rx_nombuf;
	out[2] = s.ierrors;
	out[3] = s.ipackets;
	out[4] = s.opackets;
	out[5] = s.oerrors;
	return 0;
}
