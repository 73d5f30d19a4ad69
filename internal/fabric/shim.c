//go:build fabric

// The C shim of package fabric: every libfabric object is created, used and
// closed here. See shim.h for the contract and doc.go for the design.

#include "shim.h"

#include <errno.h>
#include <netdb.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

// The API version requested: the semantics of 1.17, also on newer libraries.
#define FS_API FI_VERSION(1, 17)
// The mr_mode bits this shim handles (verbs needs all four, sockets none).
#define FS_MR_MODE (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY)
// Upper bound of a round (operations posted before reaping).
#define FS_MAX_WINDOW 256
// Longest single wait inside fi_cq_sread / fi_eq_sread before the watchdog,
// the caller's cancellation and the connection's event queue are checked
// again.
#define FS_SLICE_MS 20
// Completions read per fi_cq_read / fi_cq_sread call.
#define FS_REAP 32

static void setf(char *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, FS_ERRLEN, fmt, ap);
	va_end(ap);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void copy_name(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src ? src : "");
}

uint32_t fs_version(void)
{
	return fi_version();
}

static struct fi_info *fs_hints(const char *prov, const char *domain)
{
	struct fi_info *h = fi_allocinfo();
	if (!h)
		return NULL;
	h->ep_attr->type = FI_EP_MSG;
	h->caps = FI_RMA | FI_ATOMIC;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->domain_attr->mr_mode = FS_MR_MODE;
	if (prov && *prov)
		h->fabric_attr->prov_name = strdup(prov);
	if (domain && *domain)
		h->domain_attr->name = strdup(domain);
	return h;
}

static int fs_getinfo(char *err, const char *prov, const char *host,
		      const char *port, const char *domain, uint64_t flags,
		      struct fi_info **out)
{
	struct fi_info *h = fs_hints(prov, domain);
	int ret;

	if (!h) {
		setf(err, "fi_allocinfo: out of memory");
		return FS_EFAIL;
	}
	ret = fi_getinfo(FS_API, host && *host ? host : NULL, port, flags, h, out);
	fi_freeinfo(h);
	if (ret == -FI_ENODATA) {
		setf(err, "no provider %s offers FI_EP_MSG with FI_RMA|FI_ATOMIC at %s:%s",
		     prov && *prov ? prov : "(any)", host && *host ? host : "*", port);
		return FS_ENOPROV;
	}
	if (ret) {
		setf(err, "fi_getinfo(%s:%s): %s", host && *host ? host : "*", port,
		     fi_strerror(-ret));
		return FS_EFAIL;
	}
	return FS_OK;
}

/* ---------------------------------------------------------------- server */

struct fs_sep {
	struct fs_sep *next;
	struct fid_ep *ep;
};

struct fs_server {
	struct fs_server_pub pub; // first: fs_server_pub returns it
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_eq *eq;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_pep *pep;
	struct fid_mr **mrs;
	int nmr, capmr;
	struct fs_sep *eps;
};

struct fs_server *fs_server_new(void)
{
	return calloc(1, sizeof(struct fs_server));
}

struct fs_server_pub *fs_server_pub(struct fs_server *s)
{
	return &s->pub;
}

#define TRY(call, what)                                                   \
	do {                                                              \
		int ret_ = (int)(call);                                   \
		if (ret_) {                                               \
			setf(err, "%s: %s", what, fi_strerror(-ret_));   \
			return FS_EFAIL;                                  \
		}                                                         \
	} while (0)

int fs_server_open(struct fs_server *s, const char *prov, const char *host,
		   const char *port, const char *domain)
{
	char *err = s->pub.err;
	struct fi_eq_attr eqa = {.wait_obj = FI_WAIT_UNSPEC};
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_CONTEXT,
				 .wait_obj = FI_WAIT_NONE,
				 .size = 64};
	int rc = fs_getinfo(err, prov, host, port, domain, FI_SOURCE, &s->info);

	if (rc)
		return rc;
	copy_name(s->pub.prov, sizeof s->pub.prov, s->info->fabric_attr->prov_name);
	TRY(fi_fabric(s->info->fabric_attr, &s->fabric, NULL), "fi_fabric");
	TRY(fi_eq_open(s->fabric, &eqa, &s->eq, NULL), "fi_eq_open");
	TRY(fi_domain(s->fabric, s->info, &s->domain, NULL), "fi_domain");
	// Accepted endpoints never post; the CQ exists because verbs needs
	// one bound to create a queue pair.
	TRY(fi_cq_open(s->domain, &cqa, &s->cq, NULL), "fi_cq_open");
	TRY(fi_passive_ep(s->fabric, s->info, &s->pep, NULL), "fi_passive_ep");
	TRY(fi_pep_bind(s->pep, &s->eq->fid, 0), "fi_pep_bind");
	return FS_OK;
}

int fs_server_reg(struct fs_server *s, void *addr, uint64_t len,
		  struct fs_region *out)
{
	char *err = s->pub.err;
	struct fid_mr *mr;
	uint64_t key;
	int ret;

	if (s->nmr == s->capmr) {
		int cap = s->capmr ? 2 * s->capmr : 4;
		struct fid_mr **m = realloc(s->mrs, cap * sizeof *m);
		if (!m) {
			setf(err, "out of memory");
			return FS_EFAIL;
		}
		s->mrs = m;
		s->capmr = cap;
	}
	// requested_key is used only without FI_MR_PROV_KEY (sockets): the
	// region's index, unique in the domain.
	ret = fi_mr_reg(s->domain, addr, len, FI_REMOTE_READ | FI_REMOTE_WRITE,
			0, (uint64_t)s->nmr, 0, &mr, NULL);
	if (ret) {
		setf(err, "fi_mr_reg(region %d, %llu bytes): %s", s->nmr,
		     (unsigned long long)len, fi_strerror(-ret));
		return FS_EFAIL;
	}
	key = fi_mr_key(mr);
	if (key == FI_KEY_NOTAVAIL) {
		fi_close(&mr->fid);
		setf(err, "fi_mr_key(region %d): no key available", s->nmr);
		return FS_EFAIL;
	}
	s->mrs[s->nmr++] = mr;
	out->base = (s->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
			    ? (uint64_t)(uintptr_t)addr
			    : 0;
	out->key = key;
	out->len = len;
	return FS_OK;
}

int fs_server_listen(struct fs_server *s)
{
	char *err = s->pub.err;
	struct sockaddr_storage sa;
	size_t len = sizeof sa;
	int ret;

	TRY(fi_listen(s->pep), "fi_listen");
	TRY(fi_getname(&s->pep->fid, &sa, &len), "fi_getname");
	ret = getnameinfo((struct sockaddr *)&sa, (socklen_t)len, s->pub.host,
			  sizeof s->pub.host, s->pub.port, sizeof s->pub.port,
			  NI_NUMERICHOST | NI_NUMERICSERV);
	if (ret) {
		setf(err, "listening address: %s", gai_strerror(ret));
		return FS_EFAIL;
	}
	return FS_OK;
}

static void fs_server_drop(struct fs_server *s, fid_t fid)
{
	struct fs_sep **pp;

	for (pp = &s->eps; *pp; pp = &(*pp)->next) {
		struct fs_sep *e = *pp;
		if (&e->ep->fid != fid)
			continue;
		*pp = e->next;
		fi_close(&e->ep->fid);
		free(e);
		s->pub.endpoints--;
		return;
	}
}

static void fs_server_accept(struct fs_server *s, struct fi_info *info)
{
	struct fid_ep *ep;
	struct fs_sep *e;

	if (fi_endpoint(s->domain, info, &ep, NULL)) {
		fi_reject(s->pep, info->handle, NULL, 0);
		return;
	}
	e = calloc(1, sizeof *e);
	if (!e || fi_ep_bind(ep, &s->eq->fid, 0) ||
	    fi_ep_bind(ep, &s->cq->fid, FI_TRANSMIT | FI_RECV) ||
	    fi_enable(ep) || fi_accept(ep, NULL, 0)) {
		free(e);
		fi_close(&ep->fid);
		return;
	}
	e->ep = ep;
	e->next = s->eps;
	s->eps = e;
	s->pub.endpoints++;
}

int fs_server_poll(struct fs_server *s, int timeout_ms)
{
	struct fi_eq_cm_entry entry;
	struct fi_eq_err_entry ee;
	uint32_t event;
	ssize_t rd;

	rd = fi_eq_sread(s->eq, &event, &entry, sizeof entry, timeout_ms, 0);
	if (rd == -FI_EAGAIN || rd == -FI_EINTR || rd == -FI_ETIMEDOUT)
		return FS_OK;
	if (rd == -FI_EAVAIL) {
		memset(&ee, 0, sizeof ee);
		if (fi_eq_readerr(s->eq, &ee, 0) > 0 && ee.fid &&
		    ee.fid != &s->pep->fid)
			fs_server_drop(s, ee.fid);
		return FS_OK;
	}
	if (rd < 0) {
		setf(s->pub.err, "fi_eq_sread: %s", fi_strerror((int)-rd));
		return FS_EFAIL;
	}
	switch (event) {
	case FI_CONNREQ:
		fs_server_accept(s, entry.info);
		fi_freeinfo(entry.info);
		break;
	case FI_SHUTDOWN:
		fs_server_drop(s, entry.fid);
		break;
	default: // FI_CONNECTED: nothing to do
		break;
	}
	return FS_OK;
}

void fs_server_close(struct fs_server *s)
{
	int i;

	while (s->eps)
		fs_server_drop(s, &s->eps->ep->fid);
	if (s->pep)
		fi_close(&s->pep->fid);
	for (i = 0; i < s->nmr; i++)
		fi_close(&s->mrs[i]->fid);
	free(s->mrs);
	if (s->cq)
		fi_close(&s->cq->fid);
	if (s->domain)
		fi_close(&s->domain->fid);
	if (s->eq)
		fi_close(&s->eq->fid);
	if (s->fabric)
		fi_close(&s->fabric->fid);
	if (s->info)
		fi_freeinfo(s->info);
	free(s);
}

/* ------------------------------------------------------------ connection */

// The completion context of an operation: its index is its position in
// the slots array, which is how completions are validated.
struct fs_slot {
	struct fi_context2 ctx; // first: the context pointer is the slot
	int state;              // 0 idle, 1 posted, 2 completed
};

enum { SLOT_IDLE, SLOT_POSTED, SLOT_DONE };

struct fs_conn {
	struct fs_conn_pub pub; // first: fs_conn_pub returns it
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	void *desc;
	struct fs_slot *slots;
	int connected;
	uint64_t eq_checked; // last time the EQ was checked for FI_SHUTDOWN
};

struct fs_conn *fs_conn_new(void)
{
	return calloc(1, sizeof(struct fs_conn));
}

struct fs_conn_pub *fs_conn_pub(struct fs_conn *c)
{
	return &c->pub;
}

static int fs_conn_staging(struct fs_conn *c, uint64_t len)
{
	char *err = c->pub.err;
	void *p;
	int ret;

	if (c->mr) {
		fi_close(&c->mr->fid);
		c->mr = NULL;
		c->desc = NULL;
	}
	free(c->pub.staging);
	c->pub.staging = NULL;
	c->pub.staging_len = 0;
	if (posix_memalign(&p, 4096, len)) {
		setf(err, "staging buffer of %llu bytes: out of memory",
		     (unsigned long long)len);
		return FS_EFAIL;
	}
	memset(p, 0, len);
	c->pub.staging = p;
	c->pub.staging_len = len;
	ret = fi_mr_reg(c->domain, p, len, FI_READ | FI_WRITE, 0, 0, 0, &c->mr, NULL);
	if (ret) {
		c->mr = NULL;
		setf(err, "fi_mr_reg(staging): %s", fi_strerror(-ret));
		return FS_EFAIL;
	}
	c->desc = fi_mr_desc(c->mr);
	return FS_OK;
}

static int fs_conn_connect(struct fs_conn *c, const char *host,
			   const char *port, int timeout_ms)
{
	char *err = c->pub.err;
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	struct fi_eq_cm_entry entry;
	struct fi_eq_err_entry ee;
	uint32_t event;
	ssize_t rd;

	rd = fi_connect(c->ep, c->info->dest_addr, NULL, 0);
	if (rd) {
		// sockets connects synchronously: a refusal comes back here.
		setf(err, "connecting to %s:%s: %s", host, port, fi_strerror((int)-rd));
		return FS_EUNAVAIL;
	}
	for (;;) {
		rd = fi_eq_sread(c->eq, &event, &entry, sizeof entry, FS_SLICE_MS, 0);
		if (rd == -FI_EAGAIN || rd == -FI_EINTR || rd == -FI_ETIMEDOUT) {
			if (now_ms() >= deadline) {
				setf(err, "connecting to %s:%s: no answer in %d ms",
				     host, port, timeout_ms);
				return FS_EUNAVAIL;
			}
			continue;
		}
		if (rd == -FI_EAVAIL) {
			memset(&ee, 0, sizeof ee);
			fi_eq_readerr(c->eq, &ee, 0);
			setf(err, "connecting to %s:%s: %s", host, port,
			     fi_strerror(ee.err));
			return FS_EUNAVAIL;
		}
		if (rd < 0) {
			setf(err, "connecting to %s:%s: fi_eq_sread: %s", host,
			     port, fi_strerror((int)-rd));
			return FS_EUNAVAIL;
		}
		if (event == FI_CONNECTED)
			return FS_OK;
		setf(err, "connecting to %s:%s: unexpected event %u", host, port,
		     event);
		return FS_EUNAVAIL;
	}
}

int fs_conn_open(struct fs_conn *c, const char *prov, const char *host,
		 const char *port, const char *domain, int timeout_ms,
		 uint64_t staging_len, int workaround)
{
	char *err = c->pub.err;
	struct fi_eq_attr eqa = {.wait_obj = FI_WAIT_UNSPEC};
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_CONTEXT};
	size_t cnt;
	int rc, window, verbs;

	rc = fs_getinfo(err, prov, host, port, domain, 0, &c->info);
	if (rc)
		return rc;
	copy_name(c->pub.prov, sizeof c->pub.prov, c->info->fabric_attr->prov_name);
	verbs = strcmp(c->pub.prov, "verbs") == 0;
	// verbs completes in hardware: busy-poll. Everything else (sockets)
	// is progressed by provider threads: block, never spin.
	c->pub.blocking = !verbs;
	c->pub.verbs_atomic_bug = verbs && fi_version() < FI_VERSION(2, 2);
	c->pub.workaround = c->pub.verbs_atomic_bug && workaround;
	window = (int)c->info->tx_attr->size;
	if (window <= 0 || window > FS_MAX_WINDOW)
		window = FS_MAX_WINDOW;
	c->pub.window = window;
	c->pub.max_msg = c->info->ep_attr->max_msg_size;
	c->pub.msg_order = c->info->tx_attr->msg_order;
	c->pub.order_raw_size = c->info->ep_attr->max_order_raw_size;
	c->pub.order_war_size = c->info->ep_attr->max_order_war_size;
	c->pub.order_waw_size = c->info->ep_attr->max_order_waw_size;

	c->pub.ops = calloc(window, sizeof *c->pub.ops);
	c->slots = calloc(window, sizeof *c->slots);
	if (!c->pub.ops || !c->slots) {
		setf(err, "out of memory");
		return FS_EFAIL;
	}
	cqa.size = 2 * (size_t)window;
	cqa.wait_obj = c->pub.blocking ? FI_WAIT_UNSPEC : FI_WAIT_NONE;
	TRY(fi_fabric(c->info->fabric_attr, &c->fabric, NULL), "fi_fabric");
	TRY(fi_eq_open(c->fabric, &eqa, &c->eq, NULL), "fi_eq_open");
	TRY(fi_domain(c->fabric, c->info, &c->domain, NULL), "fi_domain");
	TRY(fi_cq_open(c->domain, &cqa, &c->cq, NULL), "fi_cq_open");
	TRY(fi_endpoint(c->domain, c->info, &c->ep, NULL), "fi_endpoint");
	TRY(fi_ep_bind(c->ep, &c->eq->fid, 0), "fi_ep_bind(eq)");
	TRY(fi_ep_bind(c->ep, &c->cq->fid, FI_TRANSMIT | FI_RECV), "fi_ep_bind(cq)");
	TRY(fi_enable(c->ep), "fi_enable");
	rc = fs_conn_staging(c, staging_len);
	if (rc)
		return rc;
	rc = fs_conn_connect(c, host, port, timeout_ms);
	if (rc)
		return rc;
	c->connected = 1;
	c->eq_checked = now_ms();
	c->pub.atomics = fi_compare_atomicvalid(c->ep, FI_UINT64, FI_CSWAP, &cnt) == 0 &&
			 cnt >= 1 &&
			 fi_fetch_atomicvalid(c->ep, FI_UINT64, FI_SUM, &cnt) == 0 &&
			 cnt >= 1;
	return FS_OK;
}

int fs_conn_grow(struct fs_conn *c, uint64_t staging_len)
{
	return fs_conn_staging(c, staging_len);
}

// fs_fences marks the operations of a round that must carry FI_FENCE: those
// whose order relative to an earlier operation of the round the provider
// does not guarantee (msg_order bits, and max_order_*_size for the data).
// READ reads, WRITE writes, CAS and FAA do both; two reads commute, so only
// RAW, WAR and WAW matter. A fence waits for every earlier operation, so
// the pending sets restart at the fenced one.
static void fs_fences(struct fs_conn *c, int n)
{
	uint64_t order = c->pub.msg_order;
	int pend_r = 0, pend_w = 0;
	uint64_t pend_len = 0;
	int i;

	for (i = 0; i < n; i++) {
		struct fs_op *op = &c->pub.ops[i];
		int r = op->kind != FS_WRITE, w = op->kind != FS_READ;
		uint64_t len = (op->kind == FS_READ || op->kind == FS_WRITE) ? op->len : 8;
		uint64_t m = len > pend_len ? len : pend_len;
		int need = (r && pend_w && (!(order & FI_ORDER_RAW) || m > c->pub.order_raw_size)) ||
			   (w && pend_r && (!(order & FI_ORDER_WAR) || m > c->pub.order_war_size)) ||
			   (w && pend_w && (!(order & FI_ORDER_WAW) || m > c->pub.order_waw_size));

		op->fenced = need;
		if (need) {
			pend_r = r;
			pend_w = w;
			pend_len = len;
		} else {
			pend_r |= r;
			pend_w |= w;
			pend_len = m;
		}
	}
}

static ssize_t fs_post(struct fs_conn *c, int i, uint64_t flags)
{
	struct fs_op *op = &c->pub.ops[i];
	void *ctx = &c->slots[i].ctx;
	uint8_t *buf = c->pub.staging + op->soff;
	uint64_t *w = (uint64_t *)buf;

	switch (op->kind) {
	case FS_READ:
	case FS_WRITE: {
		struct iovec iov = {.iov_base = buf, .iov_len = op->len};
		struct fi_rma_iov riov = {.addr = op->raddr, .len = op->len, .key = op->key};
		struct fi_msg_rma m = {.msg_iov = &iov, .desc = &c->desc, .iov_count = 1,
				       .rma_iov = &riov, .rma_iov_count = 1, .context = ctx};
		return op->kind == FS_READ ? fi_readmsg(c->ep, &m, flags)
					   : fi_writemsg(c->ep, &m, flags);
	}
	case FS_CAS:
	case FS_FAA: {
		// Slot layout: operand, compare, result.
		struct fi_ioc ioc = {.addr = &w[0], .count = 1};
		struct fi_ioc cioc = {.addr = &w[1], .count = 1};
		struct fi_ioc rioc = {.addr = &w[2], .count = 1};
		struct fi_rma_ioc rma = {.addr = op->raddr, .count = 1, .key = op->key};
		struct fi_msg_atomic m = {.msg_iov = &ioc, .desc = &c->desc, .iov_count = 1,
					  .rma_iov = &rma, .rma_iov_count = 1,
					  .datatype = FI_UINT64, .context = ctx};
		w[0] = op->operand;
		w[1] = op->compare;
		w[2] = 0;
		if (c->pub.workaround) {
			// libfabric < 2.2, verbs MSG endpoints: the work request
			// takes the compare value from the compare ioc's pointer
			// and the operand from msg->addr (see doc.go).
			m.addr = op->operand;
			cioc.addr = (void *)(uintptr_t)op->compare;
		}
		if (op->kind == FS_CAS) {
			m.op = FI_CSWAP;
			return fi_compare_atomicmsg(c->ep, &m, &cioc, &c->desc, 1, &rioc,
						    &c->desc, 1, flags);
		}
		m.op = FI_SUM;
		return fi_fetch_atomicmsg(c->ep, &m, &rioc, &c->desc, 1, flags);
	}
	}
	return -FI_EINVAL;
}

static int fs_complete(struct fs_conn *c, int n, void *ctx, int err, int prov_errno)
{
	uintptr_t p = (uintptr_t)ctx, base = (uintptr_t)c->slots;
	size_t i;

	if (!ctx || p < base || p >= base + (size_t)n * sizeof(struct fs_slot) ||
	    (p - base) % sizeof(struct fs_slot)) {
		setf(c->pub.err, "completion (error %d: %s) with unknown context %p",
		     err, fi_strerror(err), ctx);
		return FS_EBADCTX;
	}
	i = (p - base) / sizeof(struct fs_slot);
	if (c->slots[i].state != SLOT_POSTED) {
		setf(c->pub.err, "completion for operation %zu, which is not outstanding", i);
		return FS_EBADCTX;
	}
	c->slots[i].state = SLOT_DONE;
	c->pub.ops[i].err = err;
	c->pub.ops[i].prov_errno = prov_errno;
	if (!err && (c->pub.ops[i].kind == FS_CAS || c->pub.ops[i].kind == FS_FAA))
		c->pub.ops[i].old = ((uint64_t *)(c->pub.staging + c->pub.ops[i].soff))[2];
	return FS_OK;
}

// fs_check_eq reports FS_ESHUTDOWN once the connection's event queue says
// the peer is gone.
static int fs_check_eq(struct fs_conn *c)
{
	struct fi_eq_cm_entry entry;
	struct fi_eq_err_entry ee;
	uint32_t event;
	ssize_t rd;

	c->eq_checked = now_ms();
	rd = fi_eq_read(c->eq, &event, &entry, sizeof entry, 0);
	if (rd == -FI_EAGAIN || rd == -FI_EINTR)
		return FS_OK;
	if (rd == -FI_EAVAIL) {
		memset(&ee, 0, sizeof ee);
		fi_eq_readerr(c->eq, &ee, 0);
		setf(c->pub.err, "connection error: %s", fi_strerror(ee.err));
		return FS_ESHUTDOWN;
	}
	if (rd >= 0 && event != FI_SHUTDOWN)
		return FS_OK;
	setf(c->pub.err, "the peer shut the connection down");
	return FS_ESHUTDOWN;
}

// fs_reap reads the completions available, waiting at most one slice for
// the first if wait is set; it enforces the deadline and checks the EQ
// whenever a slice passed without completions.
static int fs_reap(struct fs_conn *c, int n, int *done, int wait, uint64_t deadline)
{
	struct fi_cq_entry ent[FS_REAP];
	struct fi_cq_err_entry ee;
	uint64_t now = now_ms();
	ssize_t rd;
	int k, rc;

	if (__atomic_load_n(&c->pub.cancel, __ATOMIC_ACQUIRE)) {
		setf(c->pub.err, "cancelled with %d of %d operations not completed",
		     n - *done, n);
		return FS_ECANCEL;
	}
	if (now >= deadline) {
		setf(c->pub.err, "watchdog: %d of %d operations not completed in time",
		     n - *done, n);
		return FS_ETIMEOUT;
	}
	if (wait && c->pub.blocking) {
		uint64_t slice = deadline - now;
		rd = fi_cq_sread(c->cq, ent, FS_REAP, NULL,
				 slice < FS_SLICE_MS ? (int)slice : FS_SLICE_MS);
	} else {
		rd = fi_cq_read(c->cq, ent, FS_REAP);
	}
	if (rd > 0) {
		for (k = 0; k < rd; k++) {
			rc = fs_complete(c, n, ent[k].op_context, 0, 0);
			if (rc)
				return rc;
			(*done)++;
		}
		return FS_OK;
	}
	if (rd == -FI_EAVAIL) {
		memset(&ee, 0, sizeof ee);
		rd = fi_cq_readerr(c->cq, &ee, 0);
		if (rd == -FI_EAGAIN)
			return FS_OK;
		if (rd < 0) {
			setf(c->pub.err, "fi_cq_readerr: %s", fi_strerror((int)-rd));
			return FS_EFAIL;
		}
		rc = fs_complete(c, n, ee.op_context, ee.err, ee.prov_errno);
		if (rc)
			return rc;
		(*done)++;
		return FS_OK;
	}
	if (rd != -FI_EAGAIN && rd != -FI_EINTR && rd != -FI_ETIMEDOUT) {
		setf(c->pub.err, "reading completions: %s", fi_strerror((int)-rd));
		return FS_EFAIL;
	}
	if (!c->pub.blocking || !wait)
		sched_yield();
	if (now_ms() - c->eq_checked >= FS_SLICE_MS)
		return fs_check_eq(c);
	return FS_OK;
}

static const char *fs_kind_name(int kind)
{
	switch (kind) {
	case FS_READ: return "READ";
	case FS_WRITE: return "WRITE";
	case FS_CAS: return "CAS";
	case FS_FAA: return "FAA";
	}
	return "?";
}

int fs_conn_run(struct fs_conn *c, int n, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	int posted = 0, done = 0, i, rc;

	for (i = 0; i < n; i++) {
		c->pub.ops[i].err = 0;
		c->pub.ops[i].prov_errno = 0;
		c->slots[i].state = SLOT_IDLE;
	}
	fs_fences(c, n);
	while (posted < n) {
		struct fs_op *op = &c->pub.ops[posted];
		uint64_t flags = FI_COMPLETION;
		ssize_t ret;

		if (posted + 1 < n)
			flags |= FI_MORE;
		if (op->fenced)
			flags |= FI_FENCE;
		ret = fs_post(c, posted, flags);
		if (ret == 0) {
			c->slots[posted].state = SLOT_POSTED;
			posted++;
			continue;
		}
		if (ret == -FI_EAGAIN || ret == -FI_EINTR) {
			// Queue full (possibly below its advertised size):
			// reap, then post the same operation again.
			rc = fs_reap(c, n, &done, posted > done, deadline);
			if (rc)
				return rc;
			continue;
		}
		setf(c->pub.err, "posting %s %d of %d: %s", fs_kind_name(op->kind),
		     posted, n, fi_strerror((int)-ret));
		return FS_EUNAVAIL;
	}
	while (done < n) {
		rc = fs_reap(c, n, &done, 1, deadline);
		if (rc)
			return rc;
	}
	return FS_OK;
}

void fs_conn_close(struct fs_conn *c)
{
	if (c->ep) {
		if (c->connected)
			fi_shutdown(c->ep, 0);
		fi_close(&c->ep->fid);
	}
	if (c->mr)
		fi_close(&c->mr->fid);
	if (c->cq)
		fi_close(&c->cq->fid);
	if (c->eq)
		fi_close(&c->eq->fid);
	if (c->domain)
		fi_close(&c->domain->fid);
	if (c->fabric)
		fi_close(&c->fabric->fid);
	if (c->info)
		fi_freeinfo(c->info);
	free(c->pub.staging);
	free(c->pub.ops);
	free(c->slots);
	free(c);
}

/* ------------------------------------------------------------- providers */

int fs_list(char *buf, size_t n, char *err)
{
	struct fi_info *h = fs_hints(NULL, NULL), *info = NULL, *i;
	size_t used = 0;
	int ret;

	if (!h) {
		setf(err, "fi_allocinfo: out of memory");
		return FS_EFAIL;
	}
	buf[0] = 0;
	ret = fi_getinfo(FS_API, NULL, NULL, 0, h, &info);
	fi_freeinfo(h);
	if (ret == -FI_ENODATA)
		return FS_OK;
	if (ret) {
		setf(err, "fi_getinfo: %s", fi_strerror(-ret));
		return FS_EFAIL;
	}
	for (i = info; i; i = i->next) {
		int k = snprintf(buf + used, n - used, "%s\t%s\t%s\n",
				 i->fabric_attr->prov_name, i->fabric_attr->name,
				 i->domain_attr->name);
		if (k < 0 || (size_t)k >= n - used) {
			fi_freeinfo(info);
			setf(err, "provider list longer than %zu bytes", n);
			return FS_EFAIL;
		}
		used += (size_t)k;
	}
	fi_freeinfo(info);
	return FS_OK;
}
