// AWS's DynamoDB Local, started as its own command line starts it, but bound to 127.0.0.1 and
// tied to the process that started it. Run from source by `java` (a runtime is enough: no
// compiler, no build step) by tools/local/dynamodb-local.ts, which documents the protocol:
//
//   java -cp DynamoDBLocal.jar DynamoDbLocalOnLoopback.java <port> <DynamoDB Local options...>
//
// Why not the jar's own main: it listens on every interface (it has no host option) and refuses
// port 0. Its documented embedded entry point (ServerRunner.createServerFromCommandLineArgs) builds
// the server; its Jetty connector is private, so it is reached by reflection, before anything
// listens, and given the loopback address and the port asked for (0: a free one). It prints
// `listening <port>` once it accepts connections, and stops when its standard input closes: the
// parent ended it, or the parent died (even of SIGKILL), so it never outlives its platform.
import java.lang.reflect.Field;
import java.net.BindException;
import java.util.Arrays;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public class DynamoDbLocalOnLoopback {
  static final String LOOPBACK = "127.0.0.1";

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(Arrays.copyOfRange(args, 1, args.length));
    ServerConnector connector = connectorOf(proxy);
    connector.setHost(LOOPBACK);
    connector.setPort(port);
    try {
      // Unlike start(), safeStart() throws a bind failure instead of printing it and carrying on.
      proxy.safeStart();
    } catch (Exception error) {
      if (causedBy(error, BindException.class)) {
        System.out.println("address in use " + port);
        System.exit(2);
      }
      throw error;
    }
    System.out.println("listening " + connector.getLocalPort());
    while (System.in.read() != -1) {
      // Nothing is ever written: only the end of the input counts.
    }
    proxy.stop();
    System.exit(0);
  }

  static ServerConnector connectorOf(DynamoDBProxyServer proxy) throws ReflectiveOperationException {
    Field field = DynamoDBProxyServer.class.getDeclaredField("server");
    field.setAccessible(true);
    Server jetty = (Server) field.get(proxy);
    return (ServerConnector) jetty.getConnectors()[0];
  }

  static boolean causedBy(Throwable error, Class<? extends Throwable> type) {
    for (Throwable cause = error; cause != null; cause = cause.getCause()) {
      if (type.isInstance(cause)) return true;
    }
    return false;
  }
}
