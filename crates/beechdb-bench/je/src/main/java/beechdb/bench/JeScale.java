// Seed 001's ScaleTest on Berkeley DB JE HA, driven by `beechdb-bench ha --je`:
//   master DIR ADDR GROUP REPLICAS THREADS SECONDS MASTER_SYNC REPLICA_SYNC ACK
//     REPLICAS -1: a plain (non-replicated) transactional environment. Prints "ready"; with
//     replicas, waits for "go" on standard input (the replicas have joined), then inserts
//     10-byte keys and 100-byte values, one per transaction, from THREADS threads for
//     SECONDS, and prints "ops N seconds S records R errors E" (R counted in the database).
//   node DIR ADDR GROUP NAME HELPER
//     A replica joining through HELPER; prints "ready", then "state STATE MILLIS" at each
//     change of its state, until killed.
package beechdb.bench;

import com.sleepycat.je.*;
import com.sleepycat.je.rep.*;
import java.io.*;
import java.util.concurrent.atomic.*;

public final class JeScale {
    static EnvironmentConfig envConfig(Durability d) {
        EnvironmentConfig c = new EnvironmentConfig();
        c.setAllowCreate(true);
        c.setTransactional(true);
        c.setCacheSize(256L << 20);
        c.setDurability(d);
        return c;
    }

    static Durability durability(String master, String replica, String ack) {
        return new Durability(Durability.SyncPolicy.valueOf(master),
                Durability.SyncPolicy.valueOf(replica),
                Durability.ReplicaAckPolicy.valueOf(ack));
    }

    public static void main(String[] a) throws Exception {
        if (a[0].equals("node")) {
            node(new File(a[1]), a[2], a[3], a[4], a[5]);
        } else {
            master(new File(a[1]), a[2], a[3], Integer.parseInt(a[4]), Integer.parseInt(a[5]),
                    Double.parseDouble(a[6]), durability(a[7], a[8], a[9]));
        }
    }

    static void node(File dir, String addr, String group, String name, String helper) throws Exception {
        dir.mkdirs();
        ReplicationConfig rc = new ReplicationConfig(group, name, addr);
        rc.setHelperHosts(helper);
        Durability d = durability("NO_SYNC", "NO_SYNC", "SIMPLE_MAJORITY");
        ReplicatedEnvironment env = new ReplicatedEnvironment(dir, rc, envConfig(d));
        System.out.println("ready");
        System.out.flush();
        // Called at once with the current state, then at each change.
        env.setStateChangeListener(e -> {
            System.out.println("state " + e.getState() + " " + System.currentTimeMillis());
            System.out.flush();
        });
        Thread.sleep(Long.MAX_VALUE);
    }

    static void master(File dir, String addr, String group, int replicas, int threads,
                       double seconds, Durability d) throws Exception {
        dir.mkdirs();
        Environment env;
        if (replicas < 0) {
            env = new Environment(dir, envConfig(d));
        } else {
            ReplicationConfig rc = new ReplicationConfig(group, "n1", addr);
            rc.setHelperHosts(addr);
            env = new ReplicatedEnvironment(dir, rc, envConfig(d));
        }
        DatabaseConfig dc = new DatabaseConfig();
        dc.setAllowCreate(true);
        dc.setTransactional(true);
        Database db = env.openDatabase(null, "scale", dc);
        System.out.println("ready");
        System.out.flush();
        if (replicas > 0) {
            String go = new BufferedReader(new InputStreamReader(System.in)).readLine();
            if (!"go".equals(go)) throw new IllegalStateException("expected go, got " + go);
        }
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong ops = new AtomicLong(), errors = new AtomicLong();
        Thread[] ts = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final int id = t;
            ts[t] = new Thread(() -> {
                byte[] key = new byte[10], value = new byte[100];
                java.util.Arrays.fill(value, (byte) 0x5a);
                key[0] = (byte) (id >> 8);
                key[1] = (byte) id;
                long n = 0;
                while (!stop.get()) {
                    for (int i = 0; i < 8; i++) key[2 + i] = (byte) (n >>> (56 - 8 * i));
                    Transaction txn = env.beginTransaction(null, null);
                    try {
                        db.put(txn, new DatabaseEntry(key), new DatabaseEntry(value));
                        txn.commit();
                        ops.incrementAndGet();
                        n++;
                    } catch (DatabaseException e) {
                        txn.abort();
                        errors.incrementAndGet();
                    }
                }
            });
        }
        long started = System.nanoTime();
        for (Thread t : ts) t.start();
        Thread.sleep((long) (seconds * 1000));
        stop.set(true);
        for (Thread t : ts) t.join();
        double secs = (System.nanoTime() - started) / 1e9;
        long records = db.count();
        System.out.println("ops " + ops.get() + " seconds " + secs + " records " + records + " errors " + errors.get());
        System.out.flush();
        db.close();
        env.close();
    }
}
