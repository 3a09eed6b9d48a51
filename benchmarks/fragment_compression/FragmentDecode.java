// The JVM side of benchmarks/fragment_compression.py: what a fragment hit costs the native
// reader (SplitServingReader.openFragment) per entry file: read it whole, HMAC-SHA256 over
// it (as FragmentHits.verified), open its Arrow stream with arrow-compression's codecs and
// load every batch. Run by fragment_compression.py as
//   java --add-opens=java.base/java.nio=ALL-UNNAMED -cp '<pyspark>/jars/*' FragmentDecode.java <repetitions> <passes> <label>=<entry> ...
// and prints one JSON object: per label, the median milliseconds per hit.
import java.io.ByteArrayInputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

import org.apache.arrow.compression.CommonsCompressionFactory;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.ipc.ArrowStreamReader;

public class FragmentDecode {
    static final int HEADER_BYTES = 48;

    static long hit(Path path, Mac mac, BufferAllocator allocator) throws Exception {
        byte[] data = Files.readAllBytes(path);
        mac.update(data, 0, data.length);
        mac.doFinal();
        long rows = 0;
        try (ArrowStreamReader reader = new ArrowStreamReader(
                new ByteArrayInputStream(data, HEADER_BYTES, data.length - HEADER_BYTES),
                allocator, CommonsCompressionFactory.INSTANCE)) {
            while (reader.loadNextBatch()) rows += reader.getVectorSchemaRoot().getRowCount();
        }
        return rows;
    }

    public static void main(String[] args) throws Exception {
        int reps = Integer.parseInt(args[0]);
        int passes = Integer.parseInt(args[1]);
        byte[] secret = new byte[32];
        Arrays.fill(secret, (byte) 7);
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(secret, "HmacSHA256"));
        StringBuilder out = new StringBuilder("{");
        try (BufferAllocator allocator = new RootAllocator()) {
            // Warm the JIT on every entry first, then time them interleaved per repetition.
            int n = args.length - 2;
            String[] labels = new String[n];
            Path[] paths = new Path[n];
            for (int i = 0; i < n; i++) {
                String[] kv = args[i + 2].split("=", 2);
                labels[i] = kv[0];
                paths[i] = Path.of(kv[1]);
                for (int w = 0; w < passes; w++) hit(paths[i], mac, allocator);
            }
            double[][] ms = new double[n][reps];
            for (int r = 0; r < reps; r++) {
                for (int i = 0; i < n; i++) {
                    long t0 = System.nanoTime();
                    for (int p = 0; p < passes; p++) hit(paths[i], mac, allocator);
                    ms[i][r] = (System.nanoTime() - t0) / 1e6 / passes;
                }
            }
            for (int i = 0; i < n; i++) {
                Arrays.sort(ms[i]);
                out.append(i == 0 ? "" : ", ").append('"').append(labels[i]).append("\": ")
                    .append(String.format("%.3f", ms[i][reps / 2]));
            }
        }
        System.out.println(out.append(", \"java\": \"")
            .append(System.getProperty("java.version")).append("\"}"));
    }
}
