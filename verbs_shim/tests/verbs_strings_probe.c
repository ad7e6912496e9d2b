/* Prints every string and rate conversion libibverbs offers, for comparing our libibverbs.so.1
   with rdma-core's: the same binary is run against each (check_verbs_api.py). */
#include <infiniband/verbs.h>
#include <stdio.h>

int main(void) {
    for (int i = 0; i <= IBV_WC_TM_RNDV_INCOMPLETE + 1; i++) printf("wc %d %s\n", i, ibv_wc_status_str(i));
    for (int i = 0; i <= IBV_EVENT_WQ_FATAL + 1; i++) printf("event %d %s\n", i, ibv_event_type_str(i));
    for (int i = -1; i <= IBV_NODE_UNSPECIFIED + 1; i++) printf("node %d %s\n", i, ibv_node_type_str(i));
    for (int i = 0; i <= IBV_PORT_ACTIVE_DEFER + 1; i++) printf("port %d %s\n", i, ibv_port_state_str(i));
    for (int i = -1; i <= IBV_RATE_1200_GBPS + 1; i++) {
        printf("rate %d mult %d mbps %d\n", i, ibv_rate_to_mult(i), ibv_rate_to_mbps(i));
        printf("mult %d -> %d, mbps %d -> %d\n", ibv_rate_to_mult(i), mult_to_ibv_rate(ibv_rate_to_mult(i)),
               ibv_rate_to_mbps(i), mbps_to_ibv_rate(ibv_rate_to_mbps(i)));
    }
    for (int m = -1; m <= 500; m++) printf("mult_to_rate %d %d\n", m, mult_to_ibv_rate(m));
    return 0;
}
