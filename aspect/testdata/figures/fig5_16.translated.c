<!-- Figure 5.16 of the dissertation: a code example for the xout_move element
     of the inter-domain transit (the translation of the second <transit> of
     Figure 5.11). random_str1 and random_str2 stand for generated,
     collision-free variable names. -->
<advice>
  <pointcut>
    access(netif_tx_request.flags) AND
    within_file(drivers/xen/netback/netback.c@linux0)
    AND local_var(txp, random_str1)
    AND local_var(skb, random_str2)
  </pointcut>
  <before>
    struct netif_tx_request *txp = *(void**)random_str1;
    void *skb = *(void**)random_str2;
    int id = 0;

    id |= (txp-&gt;flags &gt;&gt; 4) &amp; 0xfff;
    txp-&gt;flags &amp;= ~(0xfff &lt;&lt; 4);
    if (id != 0) {
      register_flowid(netflow, skb, id);
    }
  </before>
</advice>
