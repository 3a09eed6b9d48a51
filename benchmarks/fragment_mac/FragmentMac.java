// The JVM side of benchmarks/fragment_mac.py: HmacSHA256 (javax.crypto.Mac, what the
// native reader's FragmentHits checks) over one fragment entry's bytes, already in memory,
// and read from the (page-cached) file plus the MAC, as the reader does per hit.
// Run by fragment_mac.py as: java FragmentMac.java <entry file> <repetitions>
// (the JDK has no BLAKE2b and pyspark's jars carry no provider of it: not measured here).
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public class FragmentMac {
    public static void main(String[] args) throws Exception {
        Path path = Path.of(args[0]);
        int reps = Integer.parseInt(args[1]);
        byte[] data = Files.readAllBytes(path);
        byte[] secret = new byte[32];
        Arrays.fill(secret, (byte) 7);
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(secret, "HmacSHA256"));
        // Warm up the JIT (its intrinsics for SHA-256 engage once compiled).
        for (int i = 0; i < 200; i++) { mac.update(data); mac.doFinal(); }
        double[] inMemory = new double[reps];
        double[] withRead = new double[reps];
        for (int r = 0; r < reps; r++) {
            long t0 = System.nanoTime();
            for (int i = 0; i < 20; i++) { mac.update(data); mac.doFinal(); }
            inMemory[r] = 20.0 * data.length / ((System.nanoTime() - t0) / 1e9) / (1 << 20);
            long t1 = System.nanoTime();
            for (int i = 0; i < 20; i++) {
                byte[] d = Files.readAllBytes(path);
                mac.update(d); mac.doFinal();
            }
            withRead[r] = 20.0 * data.length / ((System.nanoTime() - t1) / 1e9) / (1 << 20);
        }
        Arrays.sort(inMemory);
        Arrays.sort(withRead);
        System.out.printf("{\"jvm_hmac_sha256_mib_s\": %.1f, \"jvm_read_and_hmac_sha256_mib_s\": %.1f, \"java\": \"%s\"}%n",
            inMemory[reps / 2], withRead[reps / 2], System.getProperty("java.version"));
    }
}
