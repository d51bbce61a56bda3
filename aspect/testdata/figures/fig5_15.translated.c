<!-- Figure 5.15 of the dissertation: a code example for the xin_move element
     of the inter-domain transit (the translation of the first <transit> of
     Figure 5.11). random_str1 and random_str2 stand for generated,
     collision-free variable names. -->
<advice>
  <pointcut>
    access(netif_tx_request.flags) AND
    within_file(drivers/xen/netfront/netfront.c@linuxU)
    AND local_var(skb, random_str1)
    AND local_var(tx, random_str2)
  </pointcut>
  <before>
    void *skb = *(void**)random_str1;
    struct netif_tx_request *tx = *(void**)random_str2;
    int id = get_flowid(netflow, skb);

    if (id != 0) {
      tx-&gt;flags |= id &lt;&lt; 4;
      id &gt;&gt;= 12;
      remove_flowid(netflow, skb);
    }
  </before>
</advice>
