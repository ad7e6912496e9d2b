/* Two MPI ranks exchanging checked data: the workload of the Open MPI CTest (check_mpi.py), where
 * each rank runs beside its own rnicd and Open MPI's UCX pml carries the traffic.
 *   1. ping-pong: messages of 8 B to 1 MiB, every byte of every reply checked, the 8-byte
 *      round trip timed;
 *   2. MPI_Allreduce (sum) of 1 Mi doubles whose expected sums are known;
 *   3. one large transfer (64 MiB by default, argv[1] in MiB) from rank 0 to rank 1 and back,
 *      checked word by word, timed.
 * Prints one "result" line per figure and "mpi_rnic_check: PASS" from rank 0; exits 1 on any
 * mismatch. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

static void fail(int rank, const char* what, size_t at) {
    fprintf(stderr, "rank %d: %s: mismatch at %zu\n", rank, what, at);
    failures++;
}

static unsigned char pattern(size_t i, int round) {
    return (unsigned char)(i * 131u + (unsigned)round * 7u + 1u);
}

static void ping_pong(int rank) {
    static const size_t sizes[] = {8, 4096, 65536, 1 << 20};
    unsigned char* buf = malloc(1 << 20);
    if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
        const size_t n = sizes[s];
        const int rounds = n <= 4096 ? 200 : 20;
        MPI_Barrier(MPI_COMM_WORLD);
        const double t0 = MPI_Wtime();
        for (int r = 0; r < rounds; ++r) {
            if (rank == 0) {
                for (size_t i = 0; i < n; ++i) buf[i] = pattern(i, r);
                MPI_Send(buf, (int)n, MPI_BYTE, 1, r, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)n, MPI_BYTE, 1, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                /* rank 1 answers every byte plus one */
                for (size_t i = 0; i < n; ++i)
                    if (buf[i] != (unsigned char)(pattern(i, r) + 1)) {
                        fail(rank, "ping-pong reply", i);
                        break;
                    }
            } else {
                MPI_Recv(buf, (int)n, MPI_BYTE, 0, r, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (size_t i = 0; i < n; ++i) {
                    if (buf[i] != pattern(i, r)) {
                        fail(rank, "ping-pong request", i);
                        break;
                    }
                }
                for (size_t i = 0; i < n; ++i) buf[i]++;
                MPI_Send(buf, (int)n, MPI_BYTE, 0, r, MPI_COMM_WORLD);
            }
        }
        const double dt = MPI_Wtime() - t0;
        if (rank == 0)
            printf("result pingpong size %zu rounds %d half_rtt_us %.1f MBps %.1f\n", n, rounds, dt / rounds / 2 * 1e6,
                   2.0 * n * rounds / dt / 1e6);
    }
    free(buf);
}

static void allreduce(int rank, int size) {
    const int n = 1 << 20;
    double* in = malloc(n * sizeof *in);
    double* out = malloc(n * sizeof *out);
    if (in == NULL || out == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
    for (int i = 0; i < n; ++i) in[i] = (double)(i % 1000) * (rank + 1);
    const double t0 = MPI_Wtime();
    MPI_Allreduce(in, out, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    const double dt = MPI_Wtime() - t0;
    const double factor = size * (size + 1) / 2.0; /* sum of (rank + 1) */
    for (int i = 0; i < n; ++i)
        if (out[i] != (double)(i % 1000) * factor) {
            fail(rank, "allreduce", (size_t)i);
            break;
        }
    if (rank == 0) printf("result allreduce doubles %d ms %.1f\n", n, dt * 1e3);
    free(in);
    free(out);
}

static void large(int rank, size_t mib) {
    const size_t words = mib * (1 << 20) / sizeof(uint64_t);
    uint64_t* buf = malloc(words * sizeof *buf);
    if (buf == NULL) MPI_Abort(MPI_COMM_WORLD, 2);
    const int count = (int)words;
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    if (rank == 0) {
        for (size_t i = 0; i < words; ++i) buf[i] = i * 0x9e3779b97f4a7c15ull;
        MPI_Send(buf, count, MPI_UINT64_T, 1, 7, MPI_COMM_WORLD);
        memset(buf, 0, words * sizeof *buf);
        MPI_Recv(buf, count, MPI_UINT64_T, 1, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (size_t i = 0; i < words; ++i)
            if (buf[i] != ~(i * 0x9e3779b97f4a7c15ull)) {
                fail(rank, "large transfer, returned", i);
                break;
            }
    } else {
        MPI_Recv(buf, count, MPI_UINT64_T, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (size_t i = 0; i < words; ++i) {
            if (buf[i] != i * 0x9e3779b97f4a7c15ull) {
                fail(rank, "large transfer", i);
                break;
            }
        }
        for (size_t i = 0; i < words; ++i) buf[i] = ~buf[i];
        MPI_Send(buf, count, MPI_UINT64_T, 0, 8, MPI_COMM_WORLD);
    }
    const double dt = MPI_Wtime() - t0;
    if (rank == 0) printf("result large MiB %zu both_ways_s %.2f MBps %.1f\n", mib, dt, 2.0 * mib * (1 << 20) / dt / 1e6);
    free(buf);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char host[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    MPI_Get_processor_name(host, &len);
    printf("rank %d of %d on %s\n", rank, size, host);
    fflush(stdout);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "mpi_rnic_check wants exactly 2 ranks\n");
        MPI_Finalize();
        return 1;
    }
    const size_t mib = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 64;
    ping_pong(rank);
    allreduce(rank, size);
    large(rank, mib ? mib : 64);
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("mpi_rnic_check: %s (%d mismatches)\n", total ? "FAIL" : "PASS", total);
    MPI_Finalize();
    return total ? 1 : 0;
}
