<!-- Figure 5.17 of the dissertation: a code example for the quit element
     (the translation of the <quit> of Figure 5.9). random_string stands for a
     generated, collision-free variable name. -->
<advice>
  <pointcut>
    access(sk_buff.%) AND
    within_function(__kfree_skb)
    AND target(random_string)
  </pointcut>
  <before>
    remove_flowid(netflow, random_string);
  </before>
</advice>
