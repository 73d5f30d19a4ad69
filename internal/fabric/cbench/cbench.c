// cbench: the plain-C baseline of package fabric's benchmarks. It connects
// to a fabric.Server with the same provider, endpoint type, mr_mode hints,
// wait mode and batch shape as the Go engine (post a window of operations,
// FI_MORE on all but the last, then block in fi_cq_sread until all have
// completed) and reports how long its verbs took, so that the cost of the
// Go and cgo layer can be measured. Built by BenchmarkGoVsC
// (bench_test.go):
//
//	cc -O2 -o cbench cbench.c $(pkg-config --cflags --libs libfabric)
//	cbench PROVIDER HOST PORT KEY BASE cas|read WINDOW
//
// It then reads verb counts from its standard input, one per line (each a
// multiple of WINDOW), runs each and answers "VERBS SECONDS", until end of
// input: the benchmark alternates C and Go runs so that both see the same
// machine load.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define CHECK(call)                                                        \
	do {                                                               \
		int ret_ = (int)(call);                                    \
		if (ret_) {                                                \
			fprintf(stderr, "cbench: %s: %s\n", #call,         \
				fi_strerror(-ret_));                       \
			exit(1);                                           \
		}                                                          \
	} while (0)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// The connection and the shape of its batches.
struct bench {
	struct fid_ep *ep;
	struct fid_cq *cq;
	uint8_t *buf; // 64 bytes per operation of a window, registered
	void *desc;
	struct fi_context2 *ctx;
	uint64_t key, base;
	int window, cas;
};

// post posts operation i of a batch of n.
static ssize_t post(struct bench *b, int i, int n)
{
	uint64_t flags = FI_COMPLETION | (i + 1 < n ? FI_MORE : 0);
	uint64_t *w = (uint64_t *)(b->buf + 64 * i);

	if (b->cas) {
		struct fi_ioc ioc = {&w[0], 1}, cioc = {&w[1], 1}, rioc = {&w[2], 1};
		struct fi_rma_ioc rma = {b->base, 1, b->key};
		struct fi_msg_atomic m = {.msg_iov = &ioc, .desc = &b->desc, .iov_count = 1,
					  .rma_iov = &rma, .rma_iov_count = 1,
					  .datatype = FI_UINT64, .op = FI_CSWAP,
					  .context = &b->ctx[i]};
		w[0] = w[1] = 0;
		return fi_compare_atomicmsg(b->ep, &m, &cioc, &b->desc, 1, &rioc, &b->desc, 1, flags);
	}
	struct iovec iov = {b->buf + 64 * i, 64};
	struct fi_rma_iov riov = {b->base, 64, b->key};
	struct fi_msg_rma m = {.msg_iov = &iov, .desc = &b->desc, .iov_count = 1,
			       .rma_iov = &riov, .rma_iov_count = 1, .context = &b->ctx[i]};
	return fi_readmsg(b->ep, &m, flags);
}

// run runs total verbs in batches of the window and returns the seconds
// they took.
static double run(struct bench *b, uint64_t total)
{
	struct fi_cq_entry comp[64];
	uint64_t done = 0;
	double start = now();

	while (done < total) {
		int n = total - done < (uint64_t)b->window ? (int)(total - done) : b->window;
		int i, reaped = 0;

		for (i = 0; i < n; i++) {
			ssize_t ret = post(b, i, n);
			if (ret == -FI_EAGAIN || ret == -FI_EINTR) {
				i--;
				continue;
			}
			if (ret) {
				fprintf(stderr, "cbench: post: %s\n", fi_strerror((int)-ret));
				exit(1);
			}
		}
		while (reaped < n) {
			ssize_t rd = fi_cq_sread(b->cq, comp, n - reaped, NULL, 1000);
			if (rd == -FI_EAGAIN || rd == -FI_EINTR)
				continue;
			if (rd < 0) {
				fprintf(stderr, "cbench: completion: %s\n", fi_strerror((int)-rd));
				exit(1);
			}
			reaped += (int)rd;
		}
		done += n;
	}
	return now() - start;
}

int main(int argc, char **argv)
{
	struct fi_info *hints, *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
	struct fid_mr *mr;
	struct fi_eq_attr eqa = {.wait_obj = FI_WAIT_UNSPEC};
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_UNSPEC};
	struct fi_eq_cm_entry entry;
	struct bench b = {0};
	unsigned long long verbs;
	uint32_t event;

	if (argc != 8) {
		fprintf(stderr, "usage: cbench PROVIDER HOST PORT KEY BASE cas|read WINDOW\n");
		return 2;
	}
	b.key = strtoull(argv[4], NULL, 10);
	b.base = strtoull(argv[5], NULL, 10);
	b.cas = strcmp(argv[6], "cas") == 0;
	b.window = atoi(argv[7]);
	if (b.window < 1 || b.window > 64) {
		fprintf(stderr, "cbench: window must be 1..64\n");
		return 2;
	}
	setenv("FI_SOCKETS_PE_WAITTIME", "0", 0);

	hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_RMA | FI_ATOMIC;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup(argv[1]);
	CHECK(fi_getinfo(FI_VERSION(1, 17), argv[2], argv[3], 0, hints, &info));
	fi_freeinfo(hints);

	CHECK(fi_fabric(info->fabric_attr, &fabric, NULL));
	CHECK(fi_eq_open(fabric, &eqa, &eq, NULL));
	CHECK(fi_domain(fabric, info, &domain, NULL));
	cqa.size = 2 * b.window;
	CHECK(fi_cq_open(domain, &cqa, &b.cq, NULL));
	CHECK(fi_endpoint(domain, info, &b.ep, NULL));
	CHECK(fi_ep_bind(b.ep, &eq->fid, 0));
	CHECK(fi_ep_bind(b.ep, &b.cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_enable(b.ep));
	if (posix_memalign((void **)&b.buf, 4096, 64 * b.window))
		return 1;
	memset(b.buf, 0, 64 * b.window);
	b.ctx = calloc(b.window, sizeof *b.ctx);
	CHECK(fi_mr_reg(domain, b.buf, 64 * b.window, FI_READ | FI_WRITE, 0, 0, 0, &mr, NULL));
	b.desc = fi_mr_desc(mr);
	CHECK(fi_connect(b.ep, info->dest_addr, NULL, 0));
	if (fi_eq_sread(eq, &event, &entry, sizeof entry, 5000, 0) < 0 || event != FI_CONNECTED) {
		fprintf(stderr, "cbench: not connected\n");
		return 1;
	}

	while (scanf("%llu", &verbs) == 1) {
		printf("%llu %.6f\n", verbs, run(&b, verbs));
		fflush(stdout);
	}

	fi_shutdown(b.ep, 0);
	fi_close(&b.ep->fid);
	fi_close(&mr->fid);
	fi_close(&b.cq->fid);
	fi_close(&eq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	return 0;
}
