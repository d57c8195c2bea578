# The start commands of etcd, kube-apiserver and kube-controller-manager, shared by up and restart. Sourced, not
# run; needs $dir and the ports ($etcd_port, $etcd_peer_port, $apiserver_port).

start_etcd() {
    spawn "$dir/etcd.log" "$dir/etcd.pid" "$cp_bin/etcd" --name default --data-dir "$dir/etcd" \
        --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
        --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
        --initial-cluster "default=http://127.0.0.1:$etcd_peer_port" \
        --listen-metrics-urls "" --unsafe-no-fsync --log-level warn
}

start_apiserver() {
    spawn "$dir/kube-apiserver.log" "$dir/kube-apiserver.pid" "$cp_bin/kube-apiserver" \
        --etcd-servers "http://127.0.0.1:$etcd_port" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$apiserver_port" \
        --tls-cert-file "$dir/apiserver.crt" --tls-private-key-file "$dir/apiserver.key" \
        --client-ca-file "$dir/ca.crt" --authorization-mode RBAC \
        --service-cluster-ip-range 10.0.0.0/24 --allow-privileged=true \
        --service-account-issuer "https://127.0.0.1:$apiserver_port" \
        --service-account-key-file "$dir/sa.pub" --service-account-signing-key-file "$dir/sa.key" \
        --cert-dir "$dir/apiserver-certs" --profiling=false -v 1 ${SLUICE_CP_APISERVER_ARGS:-}
}

start_controller_manager() {
    spawn "$dir/kube-controller-manager.log" "$dir/kube-controller-manager.pid" "$cp_bin/kube-controller-manager" \
        --kubeconfig "$dir/controller-manager.kubeconfig" --leader-elect=false --secure-port 0 \
        --controllers job-controller,garbage-collector-controller,namespace-controller,serviceaccount-controller,root-ca-certificate-publisher-controller,clusterrole-aggregation-controller,ttl-after-finished-controller,statefulset-controller \
        --root-ca-file "$dir/ca.crt" --service-account-private-key-file "$dir/sa.key" \
        --concurrent-job-syncs 10 --profiling=false -v 1
}

api() { # path
    curl -sf --max-time 2 --cacert "$dir/ca.crt" --cert "$dir/admin.crt" --key "$dir/admin.key" \
        "https://127.0.0.1:$apiserver_port$1"
}
