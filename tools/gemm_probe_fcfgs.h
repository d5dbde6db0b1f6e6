/* fused low-rank tiles: F(BM, BN, BK, WARPS_M, WARPS_N, STAGES, RANK) */
F(64, 128, 32, 2, 4, 3, 256),
F(32, 128, 64, 1, 4, 3, 256),
F(16, 64, 64, 1, 4, 3, 256),
F(32, 64, 32, 1, 4, 3, 64),
