use super::*;

fn bus(i: u32) -> String {
    format!("00000000:{:02x}:00.0", 0x10 + i)
}

fn gpus(n: u32) -> Vec<(u32, String)> {
    (0..n).map(|i| (i, bus(i))).collect()
}

#[test]
fn direct_links_form_two_islands() {
    // 0-1, 1-2 and 4-5 linked; 3 alone; 6 and 7 only linked to an unknown device.
    let links = vec![
        GpuLink {
            gpu: 0,
            remote: LinkRemote::Gpu(bus(1)),
        },
        GpuLink {
            gpu: 1,
            remote: LinkRemote::Gpu(bus(2)),
        },
        GpuLink {
            gpu: 4,
            remote: LinkRemote::Gpu(bus(5).to_uppercase()),
        },
        GpuLink {
            gpu: 6,
            remote: LinkRemote::Other,
        },
        GpuLink {
            gpu: 7,
            remote: LinkRemote::Gpu("ffff:ff:00.0".into()),
        },
    ];
    let isl = islands_from_links(&gpus(8), &links);
    assert_eq!(
        isl,
        vec![
            NvlinkIsland {
                gpus: vec![0, 1, 2],
                nvswitch: false
            },
            NvlinkIsland {
                gpus: vec![4, 5],
                nvswitch: false
            },
        ]
    );
}

#[test]
fn switches_join_every_gpu_that_reaches_them() {
    let mut links = Vec::new();
    for g in 0..4 {
        links.push(GpuLink {
            gpu: g,
            remote: LinkRemote::Switch("sw-a".into()),
        });
    }
    for g in 4..8 {
        links.push(GpuLink {
            gpu: g,
            remote: LinkRemote::Switch("sw-b".into()),
        });
    }
    let isl = islands_from_links(&gpus(8), &links);
    assert_eq!(isl.len(), 2);
    assert_eq!(
        isl[0],
        NvlinkIsland {
            gpus: vec![0, 1, 2, 3],
            nvswitch: true
        }
    );
    assert_eq!(isl[1].gpus, vec![4, 5, 6, 7]);
}

#[test]
fn validation_names_node_and_field() {
    let mut n = NodeGpus {
        gpus: (0..2)
            .map(|i| Gpu {
                index: i,
                ..Gpu::default()
            })
            .collect(),
        nvlink_islands: vec![NvlinkIsland {
            gpus: vec![0, 5],
            nvswitch: false,
        }],
        ..NodeGpus::default()
    };
    let err = n.validate("n1").unwrap_err().to_string();
    assert!(
        err.contains("n1") && err.contains("nvlinkIslands[0]"),
        "{err}"
    );
    n.nvlink_islands[0].gpus = vec![0, 1];
    assert_eq!(n.validate("n1"), Ok(()));
    n.gpus.push(Gpu {
        index: 1,
        ..Gpu::default()
    });
    assert!(matches!(
        n.validate("n1"),
        Err(TopologyError::DuplicateGpu { index: 1, .. })
    ));
}

#[test]
fn complete_islands_adds_lone_gpus() {
    let n = NodeGpus {
        gpus: (0..3)
            .map(|i| Gpu {
                index: i,
                ..Gpu::default()
            })
            .collect(),
        nvlink_islands: vec![NvlinkIsland {
            gpus: vec![0, 1],
            nvswitch: false,
        }],
        ..NodeGpus::default()
    };
    let all = n.complete_islands();
    assert_eq!(all.len(), 2);
    assert_eq!(all[1].gpus, vec![2]);
}
