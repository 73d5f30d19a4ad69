// cbench: the plain-C baseline of package fabric's benchmarks. It connects
// to a fabric.Server with the same provider, endpoint type, mr_mode hints,
// wait mode and batch shape as the Go engine (post a window of operations,
// FI_MORE on all but the last, then block in fi_cq_sread until all have
// completed) and reports verbs per second, so that the cost of the Go and
// cgo layer can be measured. Built by BenchmarkGoVsC (bench_test.go):
//
//	cc -O2 -o cbench cbench.c $(pkg-config --cflags --libs libfabric)
//	cbench PROVIDER HOST PORT KEY BASE cas|read WINDOW VERBS
//
// It prints "VERBS SECONDS" on success.
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

int main(int argc, char **argv)
{
	struct fi_info *hints, *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;
	struct fid_cq *cq;
	struct fid_ep *ep;
	struct fid_mr *mr;
	struct fi_eq_attr eqa = {.wait_obj = FI_WAIT_UNSPEC};
	struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_UNSPEC};
	struct fi_eq_cm_entry entry;
	struct fi_cq_entry comp[64];
	struct fi_context2 *ctx;
	uint32_t event;
	uint64_t key, base, total, done = 0;
	uint8_t *buf;
	void *desc;
	int window, cas, i;
	double start;

	if (argc != 9) {
		fprintf(stderr, "usage: cbench PROVIDER HOST PORT KEY BASE cas|read WINDOW VERBS\n");
		return 2;
	}
	key = strtoull(argv[4], NULL, 10);
	base = strtoull(argv[5], NULL, 10);
	cas = strcmp(argv[6], "cas") == 0;
	window = atoi(argv[7]);
	total = strtoull(argv[8], NULL, 10);
	if (window < 1 || window > 64) {
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
	cqa.size = 2 * window;
	CHECK(fi_cq_open(domain, &cqa, &cq, NULL));
	CHECK(fi_endpoint(domain, info, &ep, NULL));
	CHECK(fi_ep_bind(ep, &eq->fid, 0));
	CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	CHECK(fi_enable(ep));
	if (posix_memalign((void **)&buf, 4096, 64 * window))
		return 1;
	memset(buf, 0, 64 * window);
	ctx = calloc(window, sizeof *ctx);
	CHECK(fi_mr_reg(domain, buf, 64 * window, FI_READ | FI_WRITE, 0, 0, 0, &mr, NULL));
	desc = fi_mr_desc(mr);
	CHECK(fi_connect(ep, info->dest_addr, NULL, 0));
	if (fi_eq_sread(eq, &event, &entry, sizeof entry, 5000, 0) < 0 || event != FI_CONNECTED) {
		fprintf(stderr, "cbench: not connected\n");
		return 1;
	}

	start = now();
	while (done < total) {
		int n = total - done < (uint64_t)window ? (int)(total - done) : window;
		int reaped = 0;
		for (i = 0; i < n; i++) {
			uint64_t flags = FI_COMPLETION | (i + 1 < n ? FI_MORE : 0);
			uint64_t *w = (uint64_t *)(buf + 64 * i);
			ssize_t ret;
			if (cas) {
				struct fi_ioc ioc = {&w[0], 1}, cioc = {&w[1], 1}, rioc = {&w[2], 1};
				struct fi_rma_ioc rma = {base, 1, key};
				struct fi_msg_atomic m = {.msg_iov = &ioc, .desc = &desc, .iov_count = 1,
							  .rma_iov = &rma, .rma_iov_count = 1,
							  .datatype = FI_UINT64, .op = FI_CSWAP,
							  .context = &ctx[i]};
				w[0] = w[1] = 0;
				ret = fi_compare_atomicmsg(ep, &m, &cioc, &desc, 1, &rioc, &desc, 1, flags);
			} else {
				struct iovec iov = {buf + 64 * i, 64};
				struct fi_rma_iov riov = {base, 64, key};
				struct fi_msg_rma m = {.msg_iov = &iov, .desc = &desc, .iov_count = 1,
						       .rma_iov = &riov, .rma_iov_count = 1,
						       .context = &ctx[i]};
				ret = fi_readmsg(ep, &m, flags);
			}
			if (ret == -FI_EAGAIN || ret == -FI_EINTR) {
				i--;
				continue;
			}
			if (ret) {
				fprintf(stderr, "cbench: post: %s\n", fi_strerror((int)-ret));
				return 1;
			}
		}
		while (reaped < n) {
			ssize_t rd = fi_cq_sread(cq, comp, n - reaped, NULL, 1000);
			if (rd == -FI_EAGAIN || rd == -FI_EINTR)
				continue;
			if (rd < 0) {
				fprintf(stderr, "cbench: completion: %s\n", fi_strerror((int)-rd));
				return 1;
			}
			reaped += (int)rd;
		}
		done += n;
	}
	printf("%llu %.6f\n", (unsigned long long)done, now() - start);

	fi_shutdown(ep, 0);
	fi_close(&ep->fid);
	fi_close(&mr->fid);
	fi_close(&cq->fid);
	fi_close(&eq->fid);
	fi_close(&domain->fid);
	fi_close(&fabric->fid);
	fi_freeinfo(info);
	return 0;
}
